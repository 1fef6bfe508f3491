#!/usr/bin/env bash
# Usage: test_deb.sh BUILD_DIR CPACK
# Builds the .deb with cpack, extracts it into a scratch root and runs the
# installed desktop app on the installed demo model. Exit 77: skipped.
set -euo pipefail
build=$1
cpack=$2
for tool in "$cpack" dpkg-deb; do
  if ! command -v "$tool" >/dev/null 2>&1; then echo "SKIP: $tool not found"; exit 77; fi
done
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

echo "== cpack -G DEB"
rm -rf "$build/packages"
(cd "$build" && "$cpack" -G DEB --config "$build/CPackConfig.cmake") > "$scratch/cpack.log" 2>&1 || {
  cat "$scratch/cpack.log"; echo "FAIL: cpack"; exit 1; }
deb=$(ls "$build"/packages/strata_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { cat "$scratch/cpack.log"; echo "FAIL: no .deb under $build/packages"; exit 1; }
echo "package: $deb ($(du -h "$deb" | cut -f1))"

echo "== control"
dpkg-deb -f "$deb" Package Version Architecture Depends
depends=$(dpkg-deb -f "$deb" Depends)
for need in libqt6quick6 qml6-module-qtquick-controls qml6-module-qtquick-dialogs qml6-module-qtquick-layouts libspdlog libicu libsqlite3; do
  case "$depends" in *"$need"*) ;; *) echo "FAIL: Depends lacks $need"; exit 1;; esac
done

echo "== contents"
root=$scratch/root
dpkg-deb -x "$deb" "$root"
for f in usr/bin/strata usr/bin/strata-cli usr/share/strata/models/strata-demo-moe.gguf \
         usr/share/applications/strata.desktop usr/share/icons/hicolor/scalable/apps/strata.svg \
         usr/share/icons/hicolor/48x48/apps/strata.png usr/share/icons/hicolor/256x256/apps/strata.png; do
  [ -e "$root/$f" ] || { echo "FAIL: $f is not in the package"; exit 1; }
done

echo "== desktop entry"
if command -v desktop-file-validate >/dev/null 2>&1; then
  desktop-file-validate "$root/usr/share/applications/strata.desktop"
  echo "desktop-file-validate: ok"
else
  echo "desktop-file-validate not found: the .desktop entry was not validated (apt-get install desktop-file-utils)"
fi

echo "== the installed strata-cli finds the installed demo model"
env -u STRATA_MODEL "$root/usr/bin/strata-cli" run -p "And God said" -n 4 --temp 0 > "$scratch/cli.txt" 2>&1 || {
  cat "$scratch/cli.txt"; echo "FAIL: strata-cli run"; exit 1; }

echo "== the installed strata answers"
data=$scratch/data
"$root/usr/bin/strata" --model "$root/usr/share/strata/models/strata-demo-moe.gguf" --prompt "And God said" \
  --quit-after-reply --data-dir "$data" --timeout 120 > "$scratch/app.log" 2>&1 || {
  cat "$scratch/app.log"; echo "FAIL: strata exited $?"; exit 1; }
[ -f "$data/chats.sqlite" ] || { echo "FAIL: no chat database in $data"; exit 1; }
python3 - "$data/chats.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT role, content, partial FROM messages ORDER BY id").fetchall()
assert len(rows) == 2, rows
assert rows[0] == ("user", "And God said", 0), rows[0]
assert rows[1][0] == "assistant" and rows[1][1].strip() and rows[1][2] == 0, rows[1]
print("stored answer:", rows[1][1][:60].replace("\n", " "), "...")
PY
echo "PASS"
