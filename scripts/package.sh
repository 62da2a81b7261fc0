#!/usr/bin/env bash
# Builds Outpost's Linux packages, a .deb and an .rpm, with the Tauri bundler (the npm
# @tauri-apps/cli, pinned exactly below; nothing is downloaded outside npm/crates.io).
#
# Usage: scripts/package.sh [--debug [--no-build]]
#   (default)   release build: what users install.
#   --debug     the debug build instead (what scripts/test.sh's installed-package test uses).
#   --no-build  pack the debug programs as they are (scripts/test.sh has just built them
#               with `cargo test --workspace --no-run`, so no second, differently-featured
#               compile); fails if one is missing.
#
# Each package installs /usr/bin/outpost-app (the desktop app, with its desktop entry and
# icons), /usr/bin/outpost (the CLI) and /usr/bin/outpost-room + /usr/bin/outpost-agent (the
# local demo's programs, which the app starts as child processes; Tauri's `externalBin`). The
# version is the workspace's (Cargo.toml). The packages are copied to
# $CARGO_TARGET_DIR/packages/ (default target/packages/) as outpost_VERSION_ARCH.deb and
# outpost-VERSION-1.ARCH.rpm; their paths are printed on stdout, one a line.
# No AppImage: Tauri's AppImage bundler downloads linuxdeploy and its plugins from GitHub.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh

profile=release
cargo_profile=(--release)
tauri_profile=()
build=1
case "${1:-} ${2:-}" in
  " ") ;;
  "--debug ") profile=debug; cargo_profile=(); tauri_profile=(--debug) ;;
  "--debug --no-build") profile=debug; cargo_profile=(); tauri_profile=(--debug); build=0 ;;
  *) echo "usage: scripts/package.sh [--debug [--no-build]]" >&2; exit 2 ;;
esac
target_dir="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
bin="$target_dir/$profile"

if [ "$build" = 1 ]; then
  log "building the web UI and Outpost ($profile)"
  (cd ui && npm run build --silent >/dev/null)
  cargo build "${cargo_profile[@]}" --locked -q -p outpost-app -p outpost-cli -p outpost-room -p outpost-agent
fi
for b in outpost-app outpost outpost-room outpost-agent; do
  [ -x "$bin/$b" ] || { echo "$bin/$b is missing: build it first (or drop --no-build)" >&2; exit 1; }
done

# The extra programs, named as Tauri's externalBin wants them (NAME-TARGET_TRIPLE); they are
# installed as /usr/bin/NAME beside the app.
triple="$(rustc -vV | sed -n 's/^host: //p')"
stage="$target_dir/package-stage/$profile"
rm -rf "$stage"
mkdir -p "$stage"
extra=()
for b in outpost outpost-room outpost-agent; do
  cp "$bin/$b" "$stage/$b-$triple"
  extra+=("\"$stage/$b\"")
done
overlay="$stage/tauri.package.json"
printf '{"bundle": {"externalBin": [%s]}}\n' "$(IFS=,; echo "${extra[*]}")" > "$overlay"

# The Tauri CLI, pinned, installed once into the target dir. Not in ui/package.json: its
# lock would have to list the CLI's binaries for every platform, which the npm registry
# here does not all serve, and `npm ci` refuses a lock without them.
TAURI_CLI_VERSION=2.12.5
cli_dir="$target_dir/tauri-cli-$TAURI_CLI_VERSION"
tauri="$cli_dir/node_modules/.bin/tauri"
if [ ! -x "$tauri" ]; then
  log "installing @tauri-apps/cli $TAURI_CLI_VERSION (npm)"
  mkdir -p "$cli_dir"
  npm install --prefix "$cli_dir" --no-save --no-package-lock --no-audit --no-fund \
    --loglevel=error "@tauri-apps/cli@$TAURI_CLI_VERSION" >&2
fi
log "bundling .deb and .rpm (Tauri bundler $("$tauri" --version))"
rm -rf "$bin/bundle/deb" "$bin/bundle/rpm"
(cd src-tauri && CARGO_TARGET_DIR="$target_dir" "$tauri" bundle \
  "${tauri_profile[@]}" --bundles deb,rpm --config "$overlay" --ci >&2)

out="$target_dir/packages"
mkdir -p "$out"
version="$(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"] == "outpost-app"))')"
deb=("$bin"/bundle/deb/*_"$version"_*.deb)
rpm=("$bin"/bundle/rpm/*-"$version"-*.rpm)
[ -f "${deb[0]}" ] && [ -f "${rpm[0]}" ] || { echo "the bundler made no .deb/.rpm for $version" >&2; exit 1; }
deb_out="$out/outpost_${version}_$(dpkg --print-architecture).deb"
rpm_out="$out/outpost-${version}-1.$(uname -m).rpm"
cp "${deb[0]}" "$deb_out"
cp "${rpm[0]}" "$rpm_out"
log "packages: $deb_out, $rpm_out"
echo "$deb_out"
echo "$rpm_out"
