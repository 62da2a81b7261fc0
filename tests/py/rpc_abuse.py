"""A room participant that abuses Outpost's RPC methods with the official SDK
(tests/tests/rpc_abuse_e2e.rs, issue 30).

Roles (first argument), each aimed at the participant named by LK_TARGET (default "app"),
once it is in the room:

- flood: opens one RPC version 2 request stream (`lk.rpc_request`, the attributes the
  SDKs send) to `outpost.list_tools` and writes LK_MIB MiB into it without closing it.
  Then it calls `outpost.list_tools` itself: the reliable channel is ordered, so the
  answer means the target has received every byte written before. Prints
  {"event": "flooded", "bytes": N, "answer": ...} and holds the stream open.
- hold: opens LK_STREAMS request streams (one byte each) and never finishes them.
  Prints {"event": "held", "n": N}.
- spam: opens LK_CALLS request streams, one after the other, each finished at once.
  Prints {"event": "spammed", "n": N}.
- call: calls `outpost.list_tools` LK_CALLS times, one after the other, and prints
  {"event": "called", "results": [{"ok": ..., "payload"/"code"/"message": ...}]}; exits.

Prints "ready" once connected. Environment: LK_URL, LK_ROOM, LK_IDENTITY, LK_API_KEY,
LK_API_SECRET.
"""

import asyncio
import json
import os
import sys
import uuid

from livekit import rtc

from lkcommon import ROOM, URL, finish, serve, token, wait_remote

TARGET = os.environ.get("LK_TARGET", "app")
METHOD = "outpost.list_tools"


def log(**kv):
    print(json.dumps(kv), flush=True)


async def request_stream(room):
    """A request stream as the SDKs open one for RPC version 2."""
    return await room.local_participant.stream_text(
        destination_identities=[TARGET],
        topic="lk.rpc_request",
        attributes={
            "lk.rpc_request_id": str(uuid.uuid4()),
            "lk.rpc_request_method": METHOD,
            "lk.rpc_request_response_timeout_ms": "15000",
            "lk.rpc_request_version": "2",
        },
    )


async def call(room):
    try:
        payload = await room.local_participant.perform_rpc(
            destination_identity=TARGET, method=METHOD, payload="{}", response_timeout=20.0)
        return {"ok": True, "payload": payload}
    except rtc.RpcError as e:
        return {"ok": False, "code": e.code, "message": e.message, "data": e.data}


async def main():
    role = sys.argv[1]
    identity = os.environ["LK_IDENTITY"]
    room = rtc.Room()
    await room.connect(URL, token(identity, ROOM), rtc.RoomOptions(auto_subscribe=False))
    print("ready", flush=True)
    await wait_remote(room, TARGET, timeout=60)
    # The target's client protocol (RPC version 2) arrives with its participant info.
    await asyncio.sleep(0.5)
    held = []
    if role == "flood":
        w = await request_stream(room)
        held.append(w)
        piece = "x" * 15_000
        total = int(os.environ.get("LK_MIB", "16")) << 20
        sent = 0
        while sent < total:
            await w.write(piece)
            sent += len(piece)
        answer = await call(room)
        log(event="flooded", bytes=sent, answer=answer)
    elif role == "hold":
        for _ in range(int(os.environ.get("LK_STREAMS", "16"))):
            w = await request_stream(room)
            await w.write("x")
            held.append(w)
        log(event="held", n=len(held))
    elif role == "spam":
        n = int(os.environ.get("LK_CALLS", "300"))
        for _ in range(n):
            w = await request_stream(room)
            await w.write("{}")
            await w.aclose()
        log(event="spammed", n=n)
    elif role == "call":
        results = [await call(room) for _ in range(int(os.environ.get("LK_CALLS", "3")))]
        log(event="called", results=results)
        finish(0)
    else:
        raise SystemExit(f"unknown role {role}")
    await asyncio.Event().wait()


serve(main)
