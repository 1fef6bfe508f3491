#!/usr/bin/env bash
# Installs what is needed, builds Strata, and runs the engine on a model:
# the reference stories260K model when ../shared/fixtures is beside the
# project, else a small random-weight model made by strata-cli make-model.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
packaging/build.sh
model=../shared/fixtures/models/stories260K.gguf
if [ ! -f "$model" ]; then
  model=build/demo-random.gguf
  [ -f "$model" ] || build/app/cli/strata-cli make-model "$model" --arch llama --layers 4 --dim 256 --experts 8 --used 2
fi
exec build/app/cli/strata-cli run "$model" -p "${STRATA_PROMPT:-Once upon a time}" -n 64
