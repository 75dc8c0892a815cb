#!/usr/bin/env bash
# Install the frozen app (make bundle) for the current user on a Linux desktop: the app
# folder, a `workbench` command, the menu entry and its icons, all under PREFIX
# (default ~/.local; nothing outside it is touched). Run it again to update.
# Usage: packaging/install_linux.sh [BUNDLE_DIR]   (default build/bundle)
set -euo pipefail
cd "$(dirname "$0")/.."
bundle="${1:-build/bundle}/workbench"
prefix="${PREFIX:-$HOME/.local}"
app_id=org.concurrencyworkbench.Workbench
[[ -x $bundle/workbench ]] || { echo "no frozen app in $bundle: run make bundle"; exit 1; }

target="$prefix/lib/concurrency-workbench"
rm -rf "$target.new"
mkdir -p "$prefix/lib" "$prefix/bin" "$prefix/share/applications"
cp -a "$bundle" "$target.new"
rm -rf "$target"
mv "$target.new" "$target"
ln -sfn "$target/workbench" "$prefix/bin/workbench"

for png in resources/icons/workbench-*.png; do
  size=${png##*-}
  size=${size%.png}
  mkdir -p "$prefix/share/icons/hicolor/${size}x${size}/apps"
  cp "$png" "$prefix/share/icons/hicolor/${size}x${size}/apps/$app_id.png"
done
mkdir -p "$prefix/share/icons/hicolor/scalable/apps"
cp -L resources/icons/workbench.svg "$prefix/share/icons/hicolor/scalable/apps/$app_id.svg"
# The menu starts the installed command by its full path: a desktop's PATH may lack PREFIX/bin.
sed "s|^Exec=workbench$|Exec=\"$prefix/bin/workbench\"|" "resources/linux/$app_id.desktop" \
  >"$prefix/share/applications/$app_id.desktop"
command -v update-desktop-database >/dev/null \
  && update-desktop-database "$prefix/share/applications" 2>/dev/null || true
echo "installed: $prefix/bin/workbench, and Concurrency Workbench in the applications menu"
