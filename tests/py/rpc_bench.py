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
"""

import asyncio
import json
import os
import statistics
import time

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


async def call():
    room = rtc.Room()
    await room.connect(URL, os.environ["LK_TOKEN"], rtc.RoomOptions(auto_subscribe=False))
    wanted = os.environ.get("KINDS", "echo,calculator,echo4k,read4k").split(",")
    if "echo" in wanted or "echo4k" in wanted:
        await wait_remote(room, ECHO, 60)
    await wait_remote(room, APP, 60)
    # Tell Outpost this is a LiveKit agent at once, as livekit-agents does.
    await room.local_participant.set_attributes({"lk.agent.state": "listening"})
    lp = room.local_participant
    calc = json.dumps({"expression": "6*7"})
    read = json.dumps({"filePath": os.environ.get("READ_PATH", "")})
    mcp = json.dumps({"message": os.environ.get("MCP_MESSAGE", "hi")})
    kinds = {
        "echo": (ECHO, "echo", calc),
        "calculator": (APP, "calculator", calc),
        "echo4k": (ECHO, "echo4k", read),
        "read4k": (APP, "read_local_file", read),
        "mcp": (APP, os.environ.get("MCP_TOOL", "mcp__everything__echo"), mcp),
    }
    kinds = {k: v for k, v in kinds.items() if k in wanted}
    answers = {}

    async def once(kind):
        dest, method, payload = kinds[kind]
        t0 = time.perf_counter()
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
