"""The official SDK's connect fails for a token signed with the wrong secret, an
expired token and a token without a room grant."""

import datetime

from livekit import api, rtc

from lkcommon import KEY, SECRET, URL, check, report, run


async def refused(token):
    room = rtc.Room()
    try:
        await room.connect(URL, token, rtc.RoomOptions(auto_subscribe=False, connect_timeout=5))
    except rtc.ConnectError as e:
        return str(e.message if hasattr(e, "message") else e)
    await room.disconnect()
    return None


async def main():
    wrong = api.AccessToken(KEY, "not-the-secret").with_identity("mallory") \
        .with_grants(api.VideoGrants(room_join=True, room="interop")).to_jwt()
    expired = api.AccessToken(KEY, SECRET).with_identity("mallory") \
        .with_ttl(datetime.timedelta(seconds=-120)) \
        .with_grants(api.VideoGrants(room_join=True, room="interop")).to_jwt()
    no_grant = api.AccessToken(KEY, SECRET).with_identity("mallory").to_jwt()
    reasons = {}
    for name, tok in (("wrong_secret", wrong), ("expired", expired), ("no_grant", no_grant)):
        reason = await refused(tok)
        check(reason is not None, f"{name} token was accepted")
        reasons[name] = reason
    report(scenario="bad_token", ok=True, reasons=reasons)


run(main)
