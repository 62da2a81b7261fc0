#!/usr/bin/env bash
# Outpost's test command: installs what is missing, then runs the format check, clippy with
# warnings as errors, and every test of the workspace. CI runs exactly this.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh
setup_test_peers
setup_app_test_tools

log "cargo fmt --check"
cargo fmt --all -- --check

# Before anything compiles the app: it embeds ui/dist at compile time.
log "web UI: type check, tests, build"
(cd ui && npm run --silent check && npm test && npm run --silent build)

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The app's local demo starts outpost-room and outpost-agent from beside the app's binary,
# and `cargo test` builds only each package's own binaries: scripts/package.sh --debug builds
# all four programs (debug, like the tests) and packs them into a .deb, which the
# installed-package test (src-tauri/tests/installed_package.rs) installs with apt, runs and
# purges. Reusing the debug build keeps that test to a few minutes (no release compile).
log "Linux packages of the debug build (scripts/package.sh --debug)"
OUTPOST_DEB="$(scripts/package.sh --debug | head -n 1)"
export OUTPOST_DEB

log "cargo test"
# WebRTC tests create network namespaces: they need root (CI is root). The app's
# end-to-end tests (src-tauri/tests/app_e2e.rs, installed_package.rs) start their own Xvfb,
# D-Bus session and tauri-driver inside such a namespace; installed_package.rs installs and
# purges the package `outpost` with apt.
# The load test (tests/tests/load.rs) runs 20 s of calls here; its full length (300 s) is a
# separate command in docs/BENCHMARKS.md.
export OUTPOST_LOAD_SECS="${OUTPOST_LOAD_SECS:-20}"
cargo test --workspace --locked --no-fail-fast
