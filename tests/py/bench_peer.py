"""The receiving peer of bench.py, in its own process: echoes "ping" packets back as
"pong" and reports when a byte stream on topic "bench" has fully arrived."""

import asyncio
import json
import sys
import time

from lkcommon import connect


async def main():
    bob = await connect(sys.argv[1], room="bench")
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def echo(p):
        if p.topic == "ping":
            asyncio.ensure_future(bob.local_participant.publish_data(
                bytes(p.data), topic="pong", destination_identities=[p.participant.identity]))

    async def read(reader, sender):
        n = 0
        async for chunk in reader:
            n += len(chunk)
        done.set_result(n)

    bob.on("data_received", echo)
    bob.register_byte_stream_handler("bench", lambda r, s: asyncio.ensure_future(read(r, s)))
    print("ready", flush=True)
    n = await asyncio.wait_for(done, 600)
    print(json.dumps({"recv_bytes": n, "recv_at": time.time()}), flush=True)
    await asyncio.sleep(0.5)
    await bob.disconnect()


asyncio.run(main())
