"""A tiny chat participant for outpost-room, using the official LiveKit Python SDK.

    python talk.py URL TOKEN "hello from me"

Joins the room in TOKEN, waits for someone else, sends the message to everyone on
topic "chat", prints every chat message it receives, and exits after the first one
(or after --wait seconds).
"""

import argparse
import asyncio

from livekit import rtc


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("token")
    ap.add_argument("message")
    ap.add_argument("--wait", type=float, default=30.0, help="give up after this many seconds")
    args = ap.parse_args()

    room = rtc.Room()
    got = asyncio.Event()

    @room.on("data_received")
    def on_data(packet: rtc.DataPacket):
        if packet.topic == "chat":
            who = packet.participant.identity if packet.participant else "server"
            print(f"{who}: {packet.data.decode()}", flush=True)
            got.set()

    await room.connect(args.url, args.token, rtc.RoomOptions(auto_subscribe=False))
    me = room.local_participant.identity
    print(f"joined room {room.name!r} as {me!r}", flush=True)
    try:
        async with asyncio.timeout(args.wait):
            while not room.remote_participants:
                await asyncio.sleep(0.1)
            # The peer may still be opening its data channel; the server queues for it.
            await room.local_participant.publish_data(args.message.encode(), topic="chat")
            await got.wait()
        # publish_data returns once the SDK has queued the packet, not once it was
        # delivered; give our own message a moment to leave before hanging up.
        await asyncio.sleep(1.0)
    except TimeoutError:
        print("nobody answered in time", flush=True)
        raise SystemExit(1)
    finally:
        await room.disconnect()


asyncio.run(main())
