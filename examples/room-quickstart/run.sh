#!/usr/bin/env bash
# Starts outpost-room in a throw-away network namespace (the SDK's libwebrtc does not
# use loopback for ICE), mints two tokens, and lets two official-SDK participants talk.
# Needs root, iproute2, and the venv: python3 -m venv .venv && .venv/bin/pip install livekit livekit-api
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${OUTPOST_PYTHON:-$root/.venv/bin/python}"
bin="${OUTPOST_ROOM:-$root/target/debug/outpost-room}"
[ -x "$bin" ] || (cd "$root" && cargo build -q -p outpost-room)
ns="room-quickstart-$$"
ip netns add "$ns"
server_pid=""
cleanup() { [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; ip netns del "$ns"; }
trap cleanup EXIT
ip netns exec "$ns" sh -c 'ip link set lo up; ip link add v0 type veth peer name v1;
  ip addr add 10.99.0.1/24 dev v0; ip addr add 10.99.0.2/24 dev v1; ip link set v0 up; ip link set v1 up'
ip netns exec "$ns" "$bin" serve --bind 10.99.0.1:7880 &
server_pid=$!
sleep 1
alice=$("$bin" token --room demo --identity alice)
bob=$("$bin" token --room demo --identity bob)
cd "$(dirname "$0")"
ip netns exec "$ns" "$py" talk.py ws://10.99.0.1:7880 "$alice" "hi bob, alice here" &
a=$!
ip netns exec "$ns" "$py" talk.py ws://10.99.0.1:7880 "$bob" "hi alice, bob here"
wait "$a"
