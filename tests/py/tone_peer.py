"""A room participant for the voice hardening tests (tests/tests/voice_abuse_e2e.rs,
issue 30), on the official SDK.

- LK_PUBLISH=1: publishes a 440 Hz tone as its microphone and prints
  {"event": "published", "sid": ...}.
- LK_HIDDEN=1: joins with the `hidden` grant (never announced to the others).
- LK_LISTEN=IDENTITY: waits for IDENTITY's audio publication, asks to subscribe, and
  prints {"event": "heard", "subscribed": false} when it is not subscribed within
  LK_SECONDS (default 10), else {"event": "heard", "subscribed": true, "freq_hz": ...,
  "rms": ...} of the first half second with sound in it (or the loudest one, when none
  comes within LK_SECONDS).

Prints "ready" once connected, then stays until killed. Environment: LK_URL, LK_ROOM,
LK_IDENTITY, LK_API_KEY, LK_API_SECRET.
"""

import asyncio
import datetime
import json
import os

import numpy as np
from livekit import api, rtc

import audio_tone
from lkcommon import KEY, ROOM, SECRET, URL, serve


def log(**kv):
    print(json.dumps(kv), flush=True)


def token(identity, hidden):
    grants = api.VideoGrants(room_join=True, room=ROOM, hidden=hidden)
    return (api.AccessToken(KEY, SECRET).with_identity(identity).with_name(identity)
            .with_ttl(datetime.timedelta(seconds=600)).with_grants(grants).to_jwt())


async def listen(room, identity, seconds):
    pub = None
    for _ in range(int(seconds * 10)):
        p = room.remote_participants.get(identity)
        pubs = [x for x in (p.track_publications.values() if p else [])
                if x.kind == rtc.TrackKind.KIND_AUDIO]
        if pubs:
            pub = pubs[0]
            break
        await asyncio.sleep(0.1)
    if pub is None:
        return {"subscribed": False, "why": f"no audio publication from {identity}"}
    pub.set_subscribed(True)
    for _ in range(int(seconds * 10)):
        if pub.track is not None:
            break
        await asyncio.sleep(0.1)
    if pub.track is None:
        return {"subscribed": False, "sid": pub.sid}
    # The track plays silence until the publisher's packets flow: judge the first
    # half second that carries sound, within `seconds`.
    stream = rtc.AudioStream(pub.track, sample_rate=audio_tone.RATE, num_channels=1)
    window = audio_tone.RATE // 2
    buf = np.zeros(0)
    best = {"freq_hz": 0.0, "rms": 0.0}
    deadline = asyncio.get_running_loop().time() + seconds
    async for ev in stream:
        buf = np.concatenate([buf, np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64)])
        if len(buf) >= window:
            w, buf = buf[:window], buf[window:]
            rms = float(np.sqrt(np.mean(w * w)))
            if rms > best["rms"]:
                best = {"freq_hz": round(audio_tone.peak_hz(w), 1), "rms": round(rms, 1)}
            if rms > 1000 or asyncio.get_running_loop().time() > deadline:
                break
    await stream.aclose()
    return {"subscribed": True, "sid": pub.sid, **best}


async def main():
    identity = os.environ["LK_IDENTITY"]
    room = rtc.Room()
    await room.connect(URL, token(identity, os.environ.get("LK_HIDDEN") == "1"),
                       rtc.RoomOptions(auto_subscribe=True))
    print("ready", flush=True)
    if os.environ.get("LK_PUBLISH") == "1":
        source, _track, pub = await audio_tone.publish(room)
        tone = audio_tone.Tone(source)  # noqa: F841 - runs until the process ends
        log(event="published", sid=pub.sid)
    if os.environ.get("LK_LISTEN"):
        result = await listen(room, os.environ["LK_LISTEN"], float(os.environ.get("LK_SECONDS", "10")))
        log(event="heard", **result)
    await asyncio.Event().wait()


serve(main)
