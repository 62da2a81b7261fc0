#!/usr/bin/env bash
# Outpost's test command: installs what is missing, then runs the format check, clippy with
# warnings as errors, and every test of the workspace. CI runs exactly this.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh
setup_test_peers
setup_app_test_tools

# A build from scratch gains nothing from incremental caches, and they add gigabytes: the
# whole build (clippy and every test program) takes 7.7 GB without them (README).
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
free_gb=$(( $(df -Pk "$repo" | awk 'NR==2 {print $4}') / 1048576 ))
if (( free_gb < 12 )); then
  log "warning: only ${free_gb} GB free under $repo; the build and the test peers need about 12 GB"
fi

log "cargo fmt --check"
cargo fmt --all -- --check

# Before anything compiles the app: it embeds ui/dist at compile time.
log "web UI: type check, tests, build"
(cd ui && npm run --silent check && npm test && npm run --silent build)

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

# Build everything the tests run first: this also builds the four programs the packages
# hold (outpost-app, outpost, outpost-room, outpost-agent: each package with integration
# tests gets its binary built), which the app's demo tests find beside the app binary.
# scripts/package.sh packs those very binaries into a .deb, which the installed-package test
# (src-tauri/tests/installed_package.rs) installs with apt, runs and purges: no release
# compile and no second build for it.
log "cargo test --no-run (build)"
cargo test --workspace --locked --no-run
log "Linux packages of the debug build (scripts/package.sh --debug --no-build)"
packages="$(scripts/package.sh --debug --no-build)"
OUTPOST_DEB="$(sed -n 1p <<< "$packages")"
export OUTPOST_DEB
log "the .rpm, checked as far as a Debian machine can (scripts/check-rpm.sh)"
scripts/check-rpm.sh "$(sed -n 2p <<< "$packages")"

log "cargo test"
# WebRTC tests create network namespaces: they need root (CI is root). The app's
# end-to-end tests (src-tauri/tests/app_e2e.rs, installed_package.rs) start their own Xvfb,
# D-Bus session and tauri-driver inside such a namespace; installed_package.rs installs and
# purges the package `outpost` with apt.
# The load test (tests/tests/load.rs) runs 20 s of calls here; its full length (300 s) is a
# separate command in docs/BENCHMARKS.md.
export OUTPOST_LOAD_SECS="${OUTPOST_LOAD_SECS:-20}"
# One test at a time within each test program: two interop tests at once on a 2-core
# machine starve each other's servers and peers (livekit-server drops reliable data to a
# receiver that does not take a write within 50 ms, and the SDK's libwebrtc gives up
# connecting), which made them fail now and then. It costs a few minutes (README).
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-1}"
cargo test --workspace --locked --no-fail-fast
