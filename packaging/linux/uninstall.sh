#!/usr/bin/env bash
# Remove a per-user install made by install.sh (your chats, settings and models stay in the
# data folders that `qwen-mtp-desktop doctor` lists).
set -euo pipefail
APP_ID=qwen-mtp-desktop
PREFIX=${PREFIX:-$HOME/.local}
rm -rf "$PREFIX/opt/$APP_ID"
rm -f "$PREFIX/bin/$APP_ID" "$PREFIX/share/applications/$APP_ID.desktop" \
  "$PREFIX/share/icons/hicolor/scalable/apps/$APP_ID.svg" \
  "$PREFIX/share/icons/hicolor/256x256/apps/$APP_ID.png"
echo "removed $APP_ID from $PREFIX"
