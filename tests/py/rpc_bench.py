"""Official-SDK sides of the RPC benchmark (tests/src/bin/agents_bench.rs).

ROLE=echo: joins as LK_IDENTITY and answers two RPC methods like a frontend tool would:
`echo` (returns the request payload) and `echo4k` (returns a fixed 4 KiB JSON answer, the
size of Outpost's answer to a 4 KiB file read). Prints "ready", then serves until killed.

ROLE=caller: joins with LK_TOKEN (an agent) and, once ECHO and APP are both in the room,
calls in turns: `echo` on ECHO and `calculator` on APP with the same payload, then
`echo4k` on ECHO and `read_local_file` on APP (READ_PATH, 4 KiB). Each kind gets WARMUP
untimed calls first; then ROUNDS rounds, each making one call of every kind, so the two
sides of a comparison see the same moment of the machine. Prints one JSON line with the
p50 and p95 of each kind in milliseconds.

KINDS (comma-separated, default all four) narrows the kinds; `mcp` is one more: MCP_TOOL
(default `mcp__everything__echo`) on APP with `{"message": MCP_MESSAGE}`, answered by an MCP
server through Outpost (tests/src/bin/mcp_bench.rs). ECHO is waited for only when a kind
calls it.

`proto` is Outpost's own protocol instead of RPC: the caller is then the assistant of an
Outpost session (it answers Outpost's ClientHello with a ServerWelcome) and sends a
`calculator` ToolUseRequest (type 6, execution "client", the same expression) as a
reliable data packet on topic "outpost", timed until the ToolUseResult (type 7) with its
id comes back. It does not say it is a LiveKit agent (no `lk.agent.state`).
"""

import asyncio
import json
import os
import statistics
import time

import msgpack
from livekit import rtc

from lkcommon import URL, check, report, run, token, wait_remote

ROLE = os.environ["ROLE"]
ECHO = os.environ.get("ECHO", "echo")
APP = os.environ.get("APP", "app")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "200"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "20"))
FOUR_K = json.dumps({"content": "x" * 4000, "bytesRead": 4096, "truncated": False})


async def serve():
    room = rtc.Room()
    await room.connect(URL, token(os.environ.get("LK_IDENTITY", ECHO)),
                       rtc.RoomOptions(auto_subscribe=False))

    async def echo(data):
        return data.payload

    async def echo4k(_data):
        return FOUR_K

    room.local_participant.register_rpc_method("echo", echo)
    room.local_participant.register_rpc_method("echo4k", echo4k)
    print("ready", flush=True)
    await asyncio.Event().wait()


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(len(s) * p))]


class Protocol:
    """The assistant's side of an Outpost protocol session with APP: the messages APP
    sends on topic "outpost", by type, and the answers to our tool requests by id."""

    TOPIC = "outpost"

    def __init__(self, room):
        self.room = room
        self.hellos = asyncio.Queue()
        self.waiting = {}
        room.on("data_received", self.arrived)

    def arrived(self, p):
        if p.topic != self.TOPIC or not p.participant or p.participant.identity != APP:
            return
        m = msgpack.unpackb(bytes(p.data), raw=False)
        if m.get("type") == 2:
            self.hellos.put_nowait(m)
        elif m.get("type") == 7:
            fut = self.waiting.pop(m.get("id"), None)
            if fut is not None and not fut.done():
                fut.set_result(m)

    async def send(self, msg):
        await self.room.local_participant.publish_data(
            msgpack.packb(msg, use_bin_type=True), topic=self.TOPIC,
            destination_identities=[APP])

    async def welcome(self):
        hello = await asyncio.wait_for(self.hellos.get(), 60)
        await self.send({"type": 3, "protocolVersion": hello["protocolVersion"],
                         "sessionId": "bench-session",
                         "conversationId": hello.get("conversationId") or "bench-conversation",
                         "assistantName": "Bench"})

    async def calculator(self, n, payload):
        rid = f"bench-{n}"
        fut = asyncio.get_running_loop().create_future()
        self.waiting[rid] = fut
        await self.send({"type": 6, "id": rid, "messageId": "bench-message",
                         "toolName": "calculator", "execution": "client",
                         "parameters": json.loads(payload), "timeoutMs": 30000})
        return await asyncio.wait_for(fut, 30)


async def call():
    room = rtc.Room()
    wanted = os.environ.get("KINDS", "echo,calculator,echo4k,read4k").split(",")
    proto = Protocol(room) if "proto" in wanted else None
    await room.connect(URL, os.environ["LK_TOKEN"], rtc.RoomOptions(auto_subscribe=False))
    if "echo" in wanted or "echo4k" in wanted:
        await wait_remote(room, ECHO, 60)
    await wait_remote(room, APP, 60)
    if proto:
        await proto.welcome()
    else:
        # Tell Outpost this is a LiveKit agent at once, as livekit-agents does.
        await room.local_participant.set_attributes({"lk.agent.state": "listening"})
    lp = room.local_participant
    sent = [0]
    calc = json.dumps({"expression": "6*7"})
    read = json.dumps({"filePath": os.environ.get("READ_PATH", "")})
    mcp = json.dumps({"message": os.environ.get("MCP_MESSAGE", "hi")})
    kinds = {
        "echo": (ECHO, "echo", calc),
        "calculator": (APP, "calculator", calc),
        "echo4k": (ECHO, "echo4k", read),
        "read4k": (APP, "read_local_file", read),
        "mcp": (APP, os.environ.get("MCP_TOOL", "mcp__everything__echo"), mcp),
        "proto": (APP, "calculator", calc),
    }
    kinds = {k: v for k, v in kinds.items() if k in wanted}
    answers = {}

    async def once(kind):
        dest, method, payload = kinds[kind]
        t0 = time.perf_counter()
        if kind == "proto":
            sent[0] += 1
            answer = await proto.calculator(sent[0], payload)
        else:
            answer = await lp.perform_rpc(destination_identity=dest, method=method,
                                          payload=payload, response_timeout=30)
        ms = (time.perf_counter() - t0) * 1000
        answers[kind] = answer
        return ms

    for _ in range(WARMUP):
        for kind in kinds:
            await once(kind)
    if "calculator" in kinds:
        check(json.loads(answers["calculator"]).get("answer") == 42,
              f"calculator answered {answers['calculator']}")
    if "proto" in kinds:
        check(answers["proto"].get("success") is True
              and answers["proto"].get("result", {}).get("answer") == 42,
              f"the protocol calculator answered {answers['proto']}")
    if "read4k" in kinds:
        check(len(json.loads(answers["read4k"]).get("content", "")) == 4096,
              f"read answered {answers['read4k'][:200]}")
    if "mcp" in kinds:
        check(os.environ.get("MCP_MESSAGE", "hi") in answers["mcp"],
              f"the MCP tool answered {answers['mcp'][:200]}")
    samples = {k: [] for k in kinds}
    for _ in range(ROUNDS):
        for kind in kinds:
            samples[kind].append(await once(kind))
    out = {}
    for kind, s in samples.items():
        out[f"{kind}_p50_ms"] = round(statistics.median(s), 3)
        out[f"{kind}_p95_ms"] = round(pct(s, 0.95), 3)
    if "read4k" in kinds:
        out["read4k_answer_bytes"] = len(answers["read4k"])
    report(**out)
    await room.disconnect()


if ROLE == "echo":
    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
else:
    run(call)
