#!/usr/bin/env bash
# Outpost's run command. Today: builds Outpost and starts the local LiveKit-compatible room
# server on 127.0.0.1:7880 with two join tokens printed, ready for an assistant and a client.
# (It becomes the one-command local demo once the app and the reference assistant land.)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
source scripts/setup.sh

log "building Outpost (release)"
cargo build --release --locked -q -p outpost-room -p outpost-cli

bin="$repo/target/release"
bind="${OUTPOST_BIND:-127.0.0.1:7880}"
room="${OUTPOST_ROOM:-outpost-demo}"
log "room server on ws://$bind (offline use only; production uses LiveKit)"
echo "assistant token: $("$bin/outpost-room" token --room "$room" --identity assistant --ttl 24h)"
echo "client token:    $("$bin/outpost-room" token --room "$room" --identity outpost --ttl 24h)"
exec "$bin/outpost-room" serve --bind "$bind"
