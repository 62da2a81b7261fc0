"""An agent-like participant that sends LiveKit Agents transcriptions to LK_TARGET
(default "app") with the official SDK, for the hardening tests of what Outpost shows and
prints (tests/tests/cli_output_e2e.rs, issue 30).

Once the target is in the room, it sends one text stream on `lk.transcription` with
`lk.segment_id` = LK_SEGMENT (default "SG_1") and `lk.transcription_final` = "true":
LK_TEXT (default: LK_KIB pieces of 1 KiB, "x" each) written in LK_PIECE-byte pieces
(default 1024). With LK_ON_BEHALF=1 the stream is sent on the target's behalf (its
identity as sender, as LiveKit Agents sends its transcript of the user's speech) and
LK_TRACK names the transcribed track (`lk.transcribed_track_id`); LK_KIND=agent joins as
an agent (livekit-server lets only agents send in another's name). Then it prints
{"event": "sent", "bytes": N} and stays until killed.

Prints "ready" once connected. Environment: LK_URL, LK_ROOM, LK_IDENTITY, LK_API_KEY,
LK_API_SECRET.
"""

import asyncio
import json
import os

from livekit import rtc

from lkcommon import ROOM, URL, serve, token, wait_remote

TARGET = os.environ.get("LK_TARGET", "app")


async def main():
    room = rtc.Room()
    identity = os.environ["LK_IDENTITY"]
    await room.connect(URL, token(identity, ROOM, kind=os.environ.get("LK_KIND")),
                       rtc.RoomOptions(auto_subscribe=False))
    print("ready", flush=True)
    await wait_remote(room, TARGET, timeout=60)
    await asyncio.sleep(float(os.environ.get("LK_SETTLE", "1")))
    text = os.environ.get("LK_TEXT") or "x" * (int(os.environ.get("LK_KIB", "256")) * 1024)
    attributes = {"lk.segment_id": os.environ.get("LK_SEGMENT", "SG_1"), "lk.transcription_final": "true"}
    on_behalf = os.environ.get("LK_ON_BEHALF") == "1"
    if os.environ.get("LK_TRACK"):
        attributes["lk.transcribed_track_id"] = os.environ["LK_TRACK"]
    writer = await room.local_participant.stream_text(
        destination_identities=[TARGET], topic="lk.transcription", attributes=attributes,
        sender_identity=TARGET if on_behalf else None)
    step = int(os.environ.get("LK_PIECE", "1024"))
    for i in range(0, len(text), step):
        await writer.write(text[i:i + step])
    await writer.aclose()
    print(json.dumps({"event": "sent", "bytes": len(text.encode())}), flush=True)
    await asyncio.Event().wait()


serve(main)
