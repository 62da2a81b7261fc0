"""send_text, a 5 MiB stream_bytes with a checksum, and perform_rpc with small and
100 kB payloads, between two official-SDK participants."""

import asyncio
import hashlib
import os

from lkcommon import check, connect, report, run, wait_remote

SIZE = 5 * 1024 * 1024


async def main():
    alice = await connect("alice")
    bob = await connect("bob")
    await wait_remote(alice, "bob")
    await wait_remote(bob, "alice")
    loop = asyncio.get_running_loop()

    # Text stream.
    text_done = loop.create_future()

    async def read_text(reader, sender):
        text = await reader.read_all()
        text_done.set_result((sender, reader.info.topic, text))

    bob.register_text_stream_handler("chat", lambda r, s: asyncio.ensure_future(read_text(r, s)))
    await alice.local_participant.send_text("héllo, bob ✓", topic="chat")
    sender, topic, text = await asyncio.wait_for(text_done, 15)
    check((sender, topic, text) == ("alice", "chat", "héllo, bob ✓"), f"text stream got {(sender, topic, text)}")

    # 5 MiB byte stream with a checksum.
    payload = os.urandom(SIZE)
    digest = hashlib.sha256(payload).hexdigest()
    bytes_done = loop.create_future()

    async def read_bytes(reader, sender):
        h = hashlib.sha256()
        n = 0
        async for chunk in reader:
            h.update(chunk)
            n += len(chunk)
        bytes_done.set_result((sender, n, h.hexdigest()))

    bob.register_byte_stream_handler("blob", lambda r, s: asyncio.ensure_future(read_bytes(r, s)))
    t0 = loop.time()
    writer = await alice.local_participant.stream_bytes("blob.bin", total_size=SIZE, topic="blob")
    step = 64 * 1024
    for i in range(0, SIZE, step):
        await writer.write(payload[i:i + step])
    await writer.aclose()
    sender, n, got = await asyncio.wait_for(bytes_done, 60)
    secs = loop.time() - t0
    check(sender == "alice" and n == SIZE, f"byte stream: sender={sender} size={n}")
    check(got == digest, "byte stream checksum mismatch")

    # RPC: small and 100 kB payloads, both directions of the echo.
    @bob.local_participant.register_rpc_method("echo")
    async def echo(data):
        return f"{data.caller_identity}:{len(data.payload)}:" + data.payload

    small = await alice.local_participant.perform_rpc(destination_identity="bob", method="echo", payload="ping")
    check(small == "alice:4:ping", f"small rpc answered {small!r}")
    big_payload = "x" * 100_000
    big = await alice.local_participant.perform_rpc(
        destination_identity="bob", method="echo", payload=big_payload, response_timeout=30)
    check(big == f"alice:100000:{big_payload}", f"100 kB rpc answered {len(big)} chars")

    report(scenario="streams_rpc", ok=True, stream_bytes=n, stream_secs=round(secs, 3),
           stream_mb_s=round(n / secs / 1e6, 2))
    await alice.disconnect()
    await bob.disconnect()


run(main)
