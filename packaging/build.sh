#!/usr/bin/env bash
# Configures and builds Strata (Release) into ./build. Usage: packaging/build.sh [extra cmake args]
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$jobs"
