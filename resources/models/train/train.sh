#!/bin/sh
# Reproduces resources/models/strata-demo-moe.gguf (and its .ref.* / .config.json files)
# from scratch on a Debian 12 machine, CPU only, 2 threads, about an hour (build Strata
# first: packaging/build.sh; the export quantizes with its strata-cli quantize):
#
#     sh resources/models/train/train.sh
#
# Installs its dependencies from Debian's apt (skip with STRATA_SKIP_APT=1), builds the
# corpus (King James Bible, public domain, packages bible-kjv + bible-kjv-text), trains a
# SentencePiece tokenizer and the MoE, then exports GGUF + reference logits into
# resources/models/. Scratch files go to $STRATA_TRAIN_WORK (default /tmp/strata-demo-moe).
# Extra arguments go to train.py (e.g. --steps 20 for a smoke run).
set -eu
if [ "${STRATA_SKIP_APT:-0}" != 1 ]; then
    if [ "$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends \
        python3-torch python3-numpy python3-sentencepiece \
        bible-kjv bible-kjv-text libopenblas0-pthread
fi
cd "$(dirname "$0")"

export OMP_WAIT_POLICY=PASSIVE
exec /usr/bin/python3 train.py all --threads 2 "$@"
