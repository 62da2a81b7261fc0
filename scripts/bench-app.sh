#!/usr/bin/env bash
# Measures the release desktop app: binary size, cold start to interactive under Xvfb, idle
# memory of the whole process tree. Figures go to docs/BENCHMARKS.md ("app").
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh
(cd ui && npm run build --silent >/dev/null)
cargo build --release --locked -q -p outpost-app
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- \
  python3 scripts/bench-app.py "$repo/target/release/outpost-app"
