#!/usr/bin/env bash
# Outpost's test command: installs what is missing, then runs the format check, clippy with
# warnings as errors, and every test of the workspace. CI runs exactly this.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

log "web UI: type check, tests, build"
(cd ui && npm run --silent check && npm test && npm run --silent build)

log "cargo test"
# WebRTC tests create network namespaces: they need root (CI is root).
cargo test --workspace --locked --no-fail-fast
