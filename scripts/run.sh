#!/usr/bin/env bash
# Outpost's run command: the local demo, offline, in one command.
#
# Builds Outpost, starts the local room server (outpost-room) and the reference assistant
# (outpost-agent, scripted by default: it shows each capability from your words and is not an
# AI), then connects Outpost's headless client (`outpost connect`) in this terminal. Type a
# message and press Enter; Ctrl-D leaves. The desktop app will take the client's place once it
# lands; until then this is the whole round trip in a terminal.
#
# Try: help · read ~/outpost-demo/notes.txt · list ~/outpost-demo · calculate 6*7 ·
#      compute 2^10 · time · timeout · ssh
#
# Environment: OUTPOST_BRAIN=openai|anthropic|json (with OPENAI_API_KEY / ANTHROPIC_API_KEY,
# OUTPOST_MODEL, OUTPOST_BASE_URL) uses a language model instead of the scripted brain.
# OUTPOST_BIND (default 127.0.0.1:7880) moves the room server.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh

log "building Outpost (release; the first build takes several minutes)"
cargo build --release --locked -q -p outpost-room -p outpost-agent -p outpost-cli
bin="$repo/target/release"

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
log "connecting Outpost; history goes to ${OUTPOST_DATA_DIR:-the platform data dir} (try: help)"
"$bin/outpost" connect --url "$url" --token "$token" --room "$room" --policy "$policy"
