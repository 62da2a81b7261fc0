"""What a room's operator does through livekit-server's RoomService API (the official
`livekit-api` client), for tests of how Outpost takes it.

Usage: room_admin.py revoke_publish ROOM IDENTITY
  takes away IDENTITY's permission to publish (the server unpublishes its tracks).
       room_admin.py mute_track ROOM IDENTITY TRACK_SID
  mutes IDENTITY's track TRACK_SID (the server tells the publisher to mute it).
Reads LK_URL (ws://HOST:PORT, turned into http://), LK_API_KEY and LK_API_SECRET. Prints
one JSON line with what the server answered.
"""

import asyncio
import sys

from livekit import api

from lkcommon import KEY, SECRET, URL, fail, finish, report


async def main():
    args = sys.argv[1:]
    if not ((len(args) == 3 and args[0] == "revoke_publish")
            or (len(args) == 4 and args[0] == "mute_track")):
        fail(f"usage: {sys.argv[0]} revoke_publish ROOM IDENTITY"
             f" | mute_track ROOM IDENTITY TRACK_SID")
    room, identity = args[1], args[2]
    http = URL.replace("ws://", "http://").replace("wss://", "https://")
    lk = api.LiveKitAPI(url=http, api_key=KEY, api_secret=SECRET)
    try:
        if args[0] == "mute_track":
            res = await lk.room.mute_published_track(
                api.MuteRoomTrackRequest(room=room, identity=identity, track_sid=args[3], muted=True)
            )
            report(op="mute_track", sid=res.track.sid, muted=res.track.muted)
            finish(0)
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
