#!/usr/bin/env bash
# Outpost's run command: the local demo, offline, in one command.
#
# Installs what is missing (asking for sudo when not root), builds Outpost, and opens the
# Outpost desktop app in its local demo: the app starts the local room server (outpost-room)
# and the reference assistant (outpost-agent, scripted by default: it shows each capability
# from your words and is not an AI) as its own child processes — the same as the first-run
# screen's "Try the local demo" — and connects to them, with nothing to configure. Close the
# window to stop everything (the two programs also stop if the app crashes).
# Without a display (no $DISPLAY / $WAYLAND_DISPLAY, or OUTPOST_HEADLESS=1) this script starts
# the two programs itself and runs the headless client (`outpost connect`) in this terminal
# instead: type a message, Enter; Ctrl-D leaves.
#
# Try: help · read ~/outpost-demo/notes.txt · list ~/outpost-demo · calculate 6*7 ·
#      compute 2^10 · time · timeout · ssh · read /etc/hostname (asks for permission)
#
# Environment: OUTPOST_BRAIN=openai|anthropic|json (with OPENAI_API_KEY / ANTHROPIC_API_KEY,
# OUTPOST_MODEL, OUTPOST_BASE_URL) uses a language model instead of the scripted brain.
# OUTPOST_BIND (default 127.0.0.1:7880) moves the headless run's room server (the app's demo
# takes a free loopback port). The demo app keeps its own
# settings and history in ${XDG_DATA_HOME:-~/.local/share}/outpost-demo (OUTPOST_DEMO_PROFILE),
# apart from your own Outpost's.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh

headless=1
if [ "${OUTPOST_HEADLESS:-0}" != 1 ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  headless=0
fi
log "building Outpost (release; the first build takes several minutes)"
if [ "$headless" = 0 ]; then
  (cd ui && npm run build --silent >/dev/null)
  cargo build --release --locked -q -p outpost-room -p outpost-agent -p outpost-app
else
  cargo build --release --locked -q -p outpost-room -p outpost-agent -p outpost-cli
fi
bin="$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release"

bind="${OUTPOST_BIND:-127.0.0.1:7880}"
url="ws://$bind"
room="outpost-demo"
demo_dir="${OUTPOST_DEMO_DIR:-$HOME/outpost-demo}"
state="$(mktemp -d -t outpost-demo.XXXXXX)"

# A folder the demo may read without asking, with a file to read.
mkdir -p "$demo_dir"
[ -f "$demo_dir/notes.txt" ] || cat > "$demo_dir/notes.txt" <<'NOTES'
Outpost demo notes
- The assistant asked Outpost to read this file; Outpost's policy allowed it because
  this folder is listed with access = "allow" in the demo policy.
- Try "read ~/.ssh/id_rsa": the secrets list refuses it whatever the policy says.
NOTES
policy="$state/policy.toml"
cat > "$policy" <<POLICY
# Demo policy (see outpost-policy's default file for every option).
consent_timeout_secs = 120

[tools]

[[folders]]
path = "$demo_dir"
access = "allow"
POLICY

if [ "$headless" = 0 ]; then
  # The desktop app with a demo profile: settings that say "the local demo", the demo policy
  # (kept if it exists, so your "always" answers survive). The app starts outpost-room and
  # outpost-agent itself, from beside its own executable ($bin).
  profile="${OUTPOST_DEMO_PROFILE:-${XDG_DATA_HOME:-$HOME/.local/share}/outpost-demo}"
  mkdir -p "$profile/config" "$profile/data"
  cat > "$profile/config/settings.toml" <<SETTINGS
# Written by scripts/run.sh for the local demo.
configured = true
demo = true
SETTINGS
  [ -f "$profile/config/policy.toml" ] || cp "$policy" "$profile/config/policy.toml"
  rm -rf "$state"
  log "opening the Outpost app in its local demo (settings, history and the demo's logs: $profile); close its window to stop it"
  OUTPOST_CONFIG_DIR="$profile/config" OUTPOST_DATA_DIR="$profile/data" OUTPOST_SECRETS=memory \
    exec "$bin/outpost-app"
fi

# Headless: this script runs the room server and the assistant, and stops them at the end.
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$state"
}
trap cleanup EXIT INT TERM

log "room server on $url (logs: $state/room.log) — offline use only; production uses LiveKit"
"$bin/outpost-room" serve --bind "$bind" > "$state/room.log" 2>&1 &
pids+=($!)

agent_args=(--url "$url" --room "$room")
[ -n "${OUTPOST_BRAIN:-}" ] && agent_args+=(--brain "$OUTPOST_BRAIN")
[ -n "${OUTPOST_MODEL:-}" ] && agent_args+=(--model "$OUTPOST_MODEL")
[ -n "${OUTPOST_BASE_URL:-}" ] && agent_args+=(--base-url "$OUTPOST_BASE_URL")
log "assistant: outpost-agent ${OUTPOST_BRAIN:-scripted} (logs: $state/agent.log)"
"$bin/outpost-agent" "${agent_args[@]}" > "$state/agent.log" 2>&1 &
pids+=($!)

# USER is unset in some shells (containers, cron); `set -u` would stop the demo here.
token="$("$bin/outpost-room" token --room "$room" --identity "${USER:-user}-outpost" --ttl 12h)"

log "no display: connecting the headless client; history goes to ${OUTPOST_DATA_DIR:-the platform data dir} (try: help)"
"$bin/outpost" connect --url "$url" --token "$token" --room "$room" --policy "$policy"
