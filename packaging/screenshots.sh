#!/usr/bin/env bash
# Produces the README's screenshots with the app itself, offscreen, at
# 1280x800: docs/screenshots/chat.png (a real answer from the demo model, the
# panels open), load-plan.png (the model dialog with the demo model's memory
# plan), settings.png (the settings dialog), conversation.png (four exchanges),
# models.png (the models folder), size-960x600.png / size-1920x1080.png (the
# window at its minimum and at full HD), layers48-WxH.png (a 48-layer MoE of
# random weights at 960x600, 1280x800 and 1920x1080: the heat map's labels
# and marks, the panels at each size) and remote-strata-server.png (the app
# chatting with strata-cli serve).
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
# A conversation of four exchanges in the demo model's 2048-token context.
shot conversation --prompt "Who is the LORD?" --prompt "And what did Moses say unto the people?" \
  --prompt "Where did they go after that?" --prompt "Tell me of the king of Egypt."
# The models folder: resources/models (the demo model and its draft, if any).
mkdir -p "$scratch/models"
printf '[settings]\nmax_tokens=72\n[ui]\nmodelsFolder=%s\n' "$PWD/resources/models" > "$scratch/models/settings.ini"
"$app" --model "$model" --data-dir "$scratch/models" --screenshot "$out/models.png" --quit-after-reply --timeout 300 --show models
# The window at its minimum and at full HD.
shot size-960x600 --size 960x600 --prompt "And God said unto Noah"
shot size-1920x1080 --size 1920x1080 --prompt "And God said unto Noah"

# A 48-layer MoE (64 experts top-4; random weights, the demo's vocabulary)
# at the three sizes.
cli=$build/app/cli/strata-cli
cmake --build "$build" --target strata-cli
"$cli" make-model "$scratch/moe-48-layers.gguf" --layers 48 --dim 256 --heads 4 --kv-heads 2 --experts 64 --used 4 \
  --expert-ff 128 --type q8_0 --vocab-from "$model" >/dev/null
for size in 960x600 1280x800 1920x1080; do
  mkdir -p "$scratch/layers48-$size"
  printf '[settings]\nmax_tokens=96\ntemperature=0.7\nseed=7\n' > "$scratch/layers48-$size/settings.ini"
  "$app" --model "$scratch/moe-48-layers.gguf" --data-dir "$scratch/layers48-$size" --size "$size" \
    --screenshot "$out/layers48-$size.png" --quit-after-reply --timeout 300 --prompt "Write a long story about the sea."
done

# Chatting with a Strata server (strata-cli serve on a free port): the panels
# show the server's engine from its /metrics. (remote-llama-server.png, the
# same against llama.cpp's llama-server, which reports no engine, was made by
# hand with a llama-server built beside the project.)
"$cli" serve --port 0 > "$scratch/serve.out" 2>&1 &
serve_pid=$!
trap 'kill $serve_pid 2>/dev/null; rm -rf "$scratch"' EXIT
for _ in $(seq 100); do grep -q "serving" "$scratch/serve.out" 2>/dev/null && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*/v1' "$scratch/serve.out" | head -1)
mkdir -p "$scratch/remote"
"$app" --server "$url" --server-model strata-demo-moe --data-dir "$scratch/remote" \
  --screenshot "$out/remote-strata-server.png" --quit-after-reply --timeout 300 --prompt "Who is the LORD?"
ls -l "$out"
