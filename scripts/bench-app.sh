#!/usr/bin/env bash
# The desktop app's footprint against its floor, a blank Tauri 2 app (bench/blank-tauri: the
# template's window, same tauri and features, same release profile, same WebKit). Builds both
# in one release build, then measures both the same way under Xvfb and a private D-Bus
# session (scripts/bench-app.py): binary size, idle process-tree PSS, cold start to
# interactive (page cache dropped before every start: run as root). Prints the table of
# docs/BENCHMARKS.md ("Desktop app"). RUNS (default 5) and IDLE_SECS (default 5) tune it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh
(cd ui && npm run build --silent >/dev/null)
cargo build --release --locked -q -p outpost-app -p blank-tauri
target="${CARGO_TARGET_DIR:-$repo/target}"
xvfb-run -a -s "-screen 0 1280x800x24" dbus-run-session -- \
  python3 scripts/bench-app.py "$target/release/blank-tauri" "$target/release/outpost-app"
