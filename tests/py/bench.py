"""Benchmark through outpost-room between two official-SDK peers in separate processes
(this one and bench_peer.py): reliable data-packet round-trip latency, 10 MiB
byte-stream throughput, the same stream sent to nobody (how fast the SDK pushes into
the server at all), and a raw TCP copy over the same veth as a link baseline.
Prints one JSON line."""

import asyncio
import json
import os
import subprocess
import sys
import statistics
import time

from lkcommon import connect, report, run, wait_remote

SIZE = int(os.environ.get("BENCH_BYTES", str(10 * 1024 * 1024)))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "200"))
HOST = os.environ.get("BENCH_TCP_HOST", "127.0.0.1")


async def rtt(alice):
    waiting = {}

    def arrived(p):
        fut = waiting.pop(bytes(p.data), None) if p.topic == "pong" else None
        if fut is not None and not fut.done():
            fut.set_result(time.perf_counter())

    alice.on("data_received", arrived)
    loop = asyncio.get_running_loop()
    samples = []
    for i in range(ROUNDS + 20):
        key = f"{i}".encode().ljust(64, b".")
        fut = loop.create_future()
        waiting[key] = fut
        t0 = time.perf_counter()
        await alice.local_participant.publish_data(key, topic="ping", destination_identities=["bob"])
        t1 = await asyncio.wait_for(fut, 10)
        if i >= 20:
            samples.append((t1 - t0) * 1000)
    samples.sort()
    return {
        "rtt_ms_p50": round(statistics.median(samples), 3),
        "rtt_ms_p95": round(samples[int(len(samples) * 0.95) - 1], 3),
        "rtt_rounds": len(samples),
    }


async def send_stream(alice, dest):
    payload = os.urandom(SIZE)
    t0 = time.perf_counter()
    wall0 = time.time()
    writer = await alice.local_participant.stream_bytes(
        "bench.bin", total_size=SIZE, topic="bench", destination_identities=[dest])
    step = 256 * 1024
    for i in range(0, SIZE, step):
        await writer.write(payload[i:i + step])
    await writer.aclose()
    return wall0, time.perf_counter() - t0


async def tcp_baseline():
    """Copies SIZE bytes over TCP on the same interface, same process: link ceiling."""
    got = 0
    done = asyncio.Event()

    async def sink(reader, writer):
        nonlocal got
        while True:
            b = await reader.read(1 << 20)
            if not b:
                break
            got += len(b)
        writer.close()
        done.set()

    server = await asyncio.start_server(sink, HOST, 0)
    port = server.sockets[0].getsockname()[1]
    _, w = await asyncio.open_connection(HOST, port)
    payload = os.urandom(SIZE)
    t0 = time.perf_counter()
    for i in range(0, SIZE, 15000):
        w.write(payload[i:i + 15000])
        await w.drain()
    w.close()
    await done.wait()
    secs = time.perf_counter() - t0
    server.close()
    return {"tcp_mb_s": round(got / secs / 1e6, 2)}


async def main():
    loop = asyncio.get_running_loop()
    peer = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "bench_peer.py"), "bob"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = await loop.run_in_executor(None, peer.stdout.readline)
        assert line.strip() == "ready", line
        alice = await connect("alice", room="bench")
        await wait_remote(alice, "bob")
        await asyncio.sleep(0.5)
        out = {"scenario": "bench"}
        out.update(await rtt(alice))
        # The SDK's own push rate: the server receives and discards (no such peer).
        _, secs = await send_stream(alice, "nobody")
        out["sdk_push_mb_s"] = round(SIZE / secs / 1e6, 2)
        wall0, _ = await send_stream(alice, "bob")
        line = await loop.run_in_executor(None, peer.stdout.readline)
        got = json.loads(line)
        assert got["recv_bytes"] == SIZE, got
        secs = got["recv_at"] - wall0
        out.update({"stream_bytes": SIZE, "stream_s": round(secs, 3), "stream_mb_s": round(SIZE / secs / 1e6, 2)})
        out.update(await tcp_baseline())
        report(**out)
        await alice.disconnect()
    finally:
        if peer.poll() is None:
            peer.kill()


run(main)
