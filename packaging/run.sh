#!/usr/bin/env bash
# Installs what is needed, builds Strata, and runs the engine on the embedded
# demo model (resources/models/strata-demo-moe.gguf), streaming a continuation
# of $STRATA_PROMPT. (The desktop app will take this command's place.)
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
packaging/build.sh
exec build/app/cli/strata-cli run -p "${STRATA_PROMPT:-And it came to pass}" -n 80 --temp 0.8 --top-k 40 --top-p 0.95 \
  --repeat-penalty 1.1
