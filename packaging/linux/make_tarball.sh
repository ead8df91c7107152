#!/usr/bin/env bash
# Wrap the one-folder bundle into a .tar.gz that installs per user, with a menu entry and icon.
#
#   packaging/linux/make_tarball.sh dist/qwen-mtp-desktop dist [build/pyinstaller]
#
# Prints the path of the archive. Layout inside the archive:
#   qwen-mtp-desktop-VERSION-linux-ARCH/
#     qwen-mtp-desktop          the app (run it in place, no install needed)
#     _internal/                its runtime
#     qwen-mtp-desktop.desktop  menu entry (install.sh fills in the path)
#     qwen-mtp-desktop.png/.svg icon
#     install.sh, uninstall.sh  per-user install into ~/.local (no root)
# (An AppImage would need appimagetool, which is downloaded from GitHub: not available to
# offline builds, so the tarball is the Linux format.)
set -euo pipefail

BUNDLE=${1:?usage: make_tarball.sh BUNDLE_DIR OUT_DIR}
OUT=${2:?usage: make_tarball.sh BUNDLE_DIR OUT_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${3:-$ROOT/build/pyinstaller}
APP_ID=qwen-mtp-desktop

VERSION=$("$BUNDLE/$APP_ID" --version | head -n1 | awk '{print $2}')
ARCH=$(uname -m)
NAME="$APP_ID-$VERSION-linux-$ARCH"
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

mkdir -p "$STAGE/$NAME"
cp -a "$BUNDLE/." "$STAGE/$NAME/"
cp "$ROOT/resources/qwen-mtp-desktop.desktop" "$STAGE/$NAME/$APP_ID.desktop"
cp "$ROOT/resources/icons/app.svg" "$STAGE/$NAME/$APP_ID.svg"
# Rendered from the SVG by the spec (PyInstaller's work folder for the spec qwen_mtp_desktop).
ICON_PNG="$WORK/qwen_mtp_desktop/icons/app-256.png"
[[ -f "$ICON_PNG" ]] || { echo "missing $ICON_PNG: build the bundle first" >&2; exit 1; }
cp "$ICON_PNG" "$STAGE/$NAME/$APP_ID.png"
install -m 0755 "$HERE/install.sh" "$STAGE/$NAME/install.sh"
install -m 0755 "$HERE/uninstall.sh" "$STAGE/$NAME/uninstall.sh"

mkdir -p "$OUT"
ARCHIVE="$(cd "$OUT" && pwd)/$NAME.tar.gz"
tar -C "$STAGE" -czf "$ARCHIVE" "$NAME"
echo "$ARCHIVE"
