"""What a room's operator does through livekit-server's RoomService API (the official
`livekit-api` client), for tests of how Outpost takes it.

Usage: room_admin.py revoke_publish ROOM IDENTITY
  takes away IDENTITY's permission to publish (the server unpublishes its tracks).
Reads LK_URL (ws://HOST:PORT, turned into http://), LK_API_KEY and LK_API_SECRET. Prints
one JSON line with what the server answered.
"""

import asyncio
import sys

from livekit import api

from lkcommon import KEY, SECRET, URL, fail, finish, report


async def main():
    if len(sys.argv) != 4 or sys.argv[1] != "revoke_publish":
        fail(f"usage: {sys.argv[0]} revoke_publish ROOM IDENTITY")
    room, identity = sys.argv[2], sys.argv[3]
    http = URL.replace("ws://", "http://").replace("wss://", "https://")
    lk = api.LiveKitAPI(url=http, api_key=KEY, api_secret=SECRET)
    try:
        info = await lk.room.update_participant(
            api.UpdateParticipantRequest(
                room=room,
                identity=identity,
                permission=api.ParticipantPermission(
                    can_subscribe=True, can_publish=False, can_publish_data=True
                ),
            )
        )
        report(op="revoke_publish", identity=info.identity, can_publish=info.permission.can_publish)
    finally:
        await lk.aclose()
    finish(0)


asyncio.run(main())
