#!/usr/bin/env bash
# Produces the README's screenshots with the app itself, offscreen, at
# 1280x800: docs/screenshots/chat.png (a real answer from the demo model, the
# panels open), load-plan.png (the model dialog with the demo model's memory
# plan) and settings.png (the settings dialog).
# Usage: packaging/screenshots.sh [BUILD_DIR]   (default: build; builds `strata` first)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
cmake --build "$build" --target strata
app=$build/app/desktop/strata
model=resources/models/strata-demo-moe.gguf
out=docs/screenshots
mkdir -p "$out"
export QT_QPA_PLATFORM=offscreen
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

shot() {  # NAME [strata args...]
  local name=$1; shift
  local data=$scratch/$name
  mkdir -p "$data"
  # A shorter answer than the default 256 tokens, so it ends on its own.
  printf '[settings]\nmax_tokens=72\ntemperature=0.7\nseed=7\n' > "$data/settings.ini"
  "$app" --model "$model" --data-dir "$data" --screenshot "$out/$name.png" --quit-after-reply --timeout 300 "$@"
}

shot chat --prompt "And God said unto Noah"
shot load-plan --show model
shot settings --show settings
ls -l "$out"
