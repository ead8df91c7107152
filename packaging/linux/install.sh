#!/usr/bin/env bash
# Per-user install of the unpacked Qwen MTP Desktop tarball (no root needed):
#   ~/.local/opt/qwen-mtp-desktop/        the app
#   ~/.local/bin/qwen-mtp-desktop         a link to it
#   ~/.local/share/applications/          the menu entry
#   ~/.local/share/icons/hicolor/         the icon
# Run it from the unpacked folder: ./install.sh   (PREFIX=/opt/... to install elsewhere)
set -euo pipefail
APP_ID=qwen-mtp-desktop
SRC=$(cd "$(dirname "$0")" && pwd)
PREFIX=${PREFIX:-$HOME/.local}
DEST="$PREFIX/opt/$APP_ID"

rm -rf "$DEST"
mkdir -p "$DEST" "$PREFIX/bin" "$PREFIX/share/applications" \
  "$PREFIX/share/icons/hicolor/scalable/apps" "$PREFIX/share/icons/hicolor/256x256/apps"
cp -a "$SRC/$APP_ID" "$SRC/_internal" "$SRC/uninstall.sh" "$DEST/"
ln -sf "$DEST/$APP_ID" "$PREFIX/bin/$APP_ID"
cp "$SRC/$APP_ID.svg" "$PREFIX/share/icons/hicolor/scalable/apps/$APP_ID.svg"
if [[ -f "$SRC/$APP_ID.png" ]]; then
  cp "$SRC/$APP_ID.png" "$PREFIX/share/icons/hicolor/256x256/apps/$APP_ID.png"
fi
sed "s|^Exec=.*|Exec=$DEST/$APP_ID|" "$SRC/$APP_ID.desktop" \
  > "$PREFIX/share/applications/$APP_ID.desktop"
command -v update-desktop-database > /dev/null && \
  update-desktop-database "$PREFIX/share/applications" || true
echo "installed into $DEST; start it from the menu or run $PREFIX/bin/$APP_ID"
