#!/usr/bin/env bash
# Installs what Strata needs to build and test on Debian 12. Idempotent: does
# nothing when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev            # sanitizer and libFuzzer builds
  qt6-base-dev qt6-base-dev-tools     # Qt Test (and, later, the desktop app)
  qt6-declarative-dev qt6-declarative-dev-tools   # the desktop app (Qt Quick) and its Qt Quick Tests
  qml6-module-qtquick qml6-module-qtquick-controls qml6-module-qtquick-templates
  qml6-module-qtquick-layouts qml6-module-qtquick-dialogs qml6-module-qtquick-window
  qml6-module-qt-labs-folderlistmodel qml6-module-qtqml-workerscript qml6-module-qttest
  qt6-qpa-plugins                     # the desktop app's window (xcb, wayland) and offscreen platforms
  dpkg-dev desktop-file-utils         # cpack -G DEB (dpkg-shlibdeps) and the .desktop entry check
  libspdlog-dev libfmt-dev libicu-dev libsqlite3-dev libnuma-dev
  nlohmann-json3-dev libcpp-httplib-dev   # JSON; the OpenAI-compatible server (strata-cli serve)
  python3 python3-numpy               # the independent float64 reference forward pass (tests)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "strata setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
