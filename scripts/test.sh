#!/usr/bin/env bash
# Outpost's test command: installs what is missing, then runs the format check, clippy with
# warnings as errors, and every test of the workspace. CI runs exactly this.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
# System packages (the app's test tools' too, in the same apt call), Rust, Node and the web
# UI's packages now; the test peers (two Python venvs, livekit-server built with Go, the MCP
# reference servers, tauri-driver) in the background while the checks and the build run:
# on a fresh machine they take several minutes, much of it downloading (README).
export OUTPOST_SETUP_FOR_TESTS=1
source scripts/setup.sh
peers_log="$(mktemp)"
(setup_sdk_venv; setup_test_peers; setup_app_test_tools) >"$peers_log" 2>&1 &
peers_pid=$!
trap 'kill "$peers_pid" 2>/dev/null || true' EXIT
wait_for_peers() {
  local status=0
  wait "$peers_pid" || status=$?
  cat "$peers_log" >&2
  rm -f "$peers_log"
  if [ "$status" != 0 ]; then
    log "installing the test peers failed (exit $status)"
    exit "$status"
  fi
  # Everything is in place now: these only set the variables the tests read.
  setup_sdk_venv
  setup_test_peers
  setup_app_test_tools
}

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

wait_for_peers

log "cargo test: the test programs in two lanes side by side (scripts/test-lanes.py)"
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
# Two test programs at a time, though: one from each of two lanes (the LiveKit client,
# room and voice programs; everything else), each running its tests one by one. These
# tests mostly wait on the network, so the lanes cost each other little (README has the
# times). The ten-peer room test and the load test run alone afterwards. Every program
# runs, as with --no-fail-fast; a table of their times comes last.
python3 scripts/test-lanes.py
