"""An official-SDK participant that behaves like a LiveKit agent towards the Rust
client under test (tests/tests/livekit_rpc.rs): it calls the client's RPC methods,
sends `lk.chat` and `lk.transcription` text streams, sets `lk.agent.state`, answers
the client's RPC calls, and reports what it saw of the client.

Steps are driven by JSON data packets from the client on topic "ctl" ({"op": ...});
results go back on topic "result". Prints "ready" once connected.
Environment: LK_URL, LK_ROOM, LK_API_KEY, LK_API_SECRET, LK_APP (the client's identity),
LK_RPC ("v2" when the client advertises RPC version 2, so that this SDK speaks it with the
client; "v1" otherwise): with v2 it also makes calls and sends streams only version 2 allows.
"""

import asyncio
import json
import os
import sys
import time

from livekit import rtc

from lkcommon import ROOM, URL, finish, token

APP = os.environ.get("LK_APP", "app")
V2 = os.environ.get("LK_RPC", "v1") == "v2"


async def main():
    room = rtc.Room()
    ctl = asyncio.Queue()
    chats = []
    app_attr_events = []

    def on_data(p):
        if p.topic == "ctl":
            ctl.put_nowait(json.loads(bytes(p.data)))

    async def read_chat(reader, sender):
        text = await reader.read_all()
        info = reader.info
        chats.append({"sender": sender, "topic": info.topic, "text": text,
                      "attributes": dict(info.attributes or {})})

    room.on("data_received", on_data)
    # The moment the client appears, call a method it registered before joining, with no
    # retry: it must be answered, never "unsupported method".
    early = asyncio.get_event_loop().create_future()

    async def call_early():
        try:
            r = await room.local_participant.perform_rpc(
                destination_identity=APP, method="early", payload="first")
            early.set_result({"ok": r})
        except rtc.RpcError as e:
            early.set_result({"code": e.code, "message": e.message})

    room.on("participant_connected",
            lambda p: asyncio.ensure_future(call_early()) if p.identity == APP else None)
    room.on("participant_attributes_changed",
            lambda changed, p: app_attr_events.append(dict(changed)) if p.identity == APP else None)
    room.register_text_stream_handler("lk.chat", lambda r, s: asyncio.ensure_future(read_chat(r, s)))
    await room.connect(URL, token("agent", ROOM, update_own_metadata=True),
                       rtc.RoomOptions(auto_subscribe=False))
    lp = room.local_participant

    async def echo(data):
        return f"agent-echo:{data.caller_identity}:{data.payload}"

    async def fail(data):
        raise rtc.RpcError(2002, "agent says no", '{"why": "test"}')

    async def large(data):
        return f"{len(data.payload)}:" + "A" * 300_000

    async def slow(data):
        await asyncio.sleep(30)
        return "too late"

    async def bad_response(data):
        # A version 2 response stream for the caller's request that the sender aborts
        # half-way: the caller must fail the call with a clear error.
        w = await lp.stream_text(topic="lk.rpc_response", destination_identities=[data.caller_identity],
                                 attributes={"lk.rpc_request_id": data.request_id})
        await w.write("par")
        await w.aclose(reason="agent gave up")
        await asyncio.sleep(0.5)
        return "the aborted stream came first"

    lp.register_rpc_method("agent.echo", echo)
    lp.register_rpc_method("agent.fail", fail)
    lp.register_rpc_method("agent.large", large)
    lp.register_rpc_method("agent.slow", slow)
    lp.register_rpc_method("agent.bad_response", bad_response)
    print("ready", flush=True)

    async def expect(op):
        while True:
            m = await asyncio.wait_for(ctl.get(), 60)
            if m.get("op") == op:
                return m

    async def send(**kv):
        await lp.publish_data(json.dumps(kv).encode(), topic="result", destination_identities=[APP])

    async def call(method, payload, **kw):
        t0 = time.monotonic()
        try:
            r = await lp.perform_rpc(destination_identity=APP, method=method, payload=payload, **kw)
            return {"ok": r, "secs": round(time.monotonic() - t0, 3)}
        except rtc.RpcError as e:
            return {"code": e.code, "message": e.message, "data": e.data,
                    "secs": round(time.monotonic() - t0, 3)}

    await expect("go")
    results = {
        "early": await asyncio.wait_for(early, 30),
        "echo": await call("echo", "hello ✓"),
        "unknown": await call("no.such.method", "{}"),
        "fail": await call("fail", "{}"),
        "big": await call("big", ""),
        "max": await call("max", ""),
        "panic": await call("panic", ""),
        # The SDK tells the handler 9 s - 7 s (its ack allowance) = 2 s.
        "slow": await call("slow", "", response_timeout=9),
    }
    if V2:
        results["large"] = await call("large", "L" * 100_000)
        # Malformed version 2 requests: no request id, a version we do not speak, a
        # stream its sender aborts. The client must survive them and still answer.
        base = {"lk.rpc_request_method": "echo", "lk.rpc_request_response_timeout_ms": "5000"}
        await lp.send_text("x", topic="lk.rpc_request", destination_identities=[APP],
                           attributes={**base, "lk.rpc_request_version": "2"})
        await lp.send_text("x", topic="lk.rpc_request", destination_identities=[APP],
                           attributes={**base, "lk.rpc_request_version": "7",
                                       "lk.rpc_request_id": "bad-version"})
        w = await lp.stream_text(topic="lk.rpc_request", destination_identities=[APP],
                                 attributes={**base, "lk.rpc_request_version": "2",
                                             "lk.rpc_request_id": "aborted"})
        await w.write("par")
        await w.aclose(reason="caller gave up")
        await lp.send_bytes(b"\xff", topic="lk.rpc_request", destination_identities=[APP])
        results["after_malformed"] = await call("echo", "still there")
    for k in ("max", "big", "large"):
        if k in results and "ok" in results[k]:
            results[k]["ok"] = len(results[k]["ok"])
    await send(op="rpc", results=results)

    await lp.send_text("hi from the agent ✓", topic="lk.chat", attributes={"lk.test": "1"},
                       destination_identities=[APP])
    # An interim transcript written in pieces: the client must see the first piece
    # before the rest is written.
    w = await lp.stream_text(topic="lk.transcription", destination_identities=[APP],
                             attributes={"lk.segment_id": "SG_1", "lk.transcription_final": "false",
                                         "lk.transcribed_track_id": "TR_x"})
    await w.write("Hel")
    await expect("got-chunk")
    await w.write("lo wor")
    await w.write("ld 😀")
    await w.aclose()
    await lp.send_text("Hello world 😀", topic="lk.transcription", destination_identities=[APP],
                       attributes={"lk.segment_id": "SG_1", "lk.transcription_final": "true"})
    await lp.set_attributes({"lk.agent.state": "thinking"})
    await send(op="your-turn")

    await expect("check")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not chats:
        await asyncio.sleep(0.05)
    app = room.remote_participants.get(APP)
    await send(op="seen", chats=chats, app_attr_events=app_attr_events,
               app_client_protocol=app._info.client_protocol if app else None,
               app_attributes=dict(app.attributes) if app else None,
               app_metadata=app.metadata if app else None)
    await expect("exit")
    await room.disconnect()


try:
    asyncio.run(main())
except KeyboardInterrupt:
    pass
finish(0)
