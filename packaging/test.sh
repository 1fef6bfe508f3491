#!/usr/bin/env bash
# Installs what is needed, builds Strata, and runs every test: the CTest
# suites, then the GGUF reader under ASan+UBSan and its libFuzzer target for a
# bounded time.
set -euo pipefail
cd "$(dirname "$0")/.."
packaging/setup.sh
packaging/build.sh
jobs=$(nproc 2>/dev/null || echo 2)
(cd build && ctest --output-on-failure -j "$jobs" --label-exclude gpu)
if [ -x packaging/sanitize-and-fuzz.sh ]; then
  packaging/sanitize-and-fuzz.sh
fi
