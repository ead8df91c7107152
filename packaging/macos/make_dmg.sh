#!/usr/bin/env bash
# Wrap the PyInstaller .app into a compressed disk image with an Applications link.
#
#   packaging/macos/make_dmg.sh "dist/Qwen MTP Desktop.app" dist
#
# Prints the path of the .dmg. Needs macOS (hdiutil). The app is not signed or notarized:
# first start with right-click > Open, or sign it with `codesign --deep -s IDENTITY` first.
set -euo pipefail

APP=${1:?usage: make_dmg.sh APP_BUNDLE OUT_DIR}
OUT=${2:?usage: make_dmg.sh APP_BUNDLE OUT_DIR}
APP_ID=qwen-mtp-desktop
VERSION=$("$APP/Contents/MacOS/$APP_ID-cli" --version | head -n1 | awk '{print $2}')
ARCH=$(uname -m)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT

cp -R "$APP" "$STAGE/"
ln -s /Applications "$STAGE/Applications"
mkdir -p "$OUT"
DMG="$(cd "$OUT" && pwd)/$APP_ID-$VERSION-macos-$ARCH.dmg"
rm -f "$DMG"
hdiutil create -volname "Qwen MTP Desktop" -srcfolder "$STAGE" -ov -format UDZO "$DMG" > /dev/null
echo "$DMG"
