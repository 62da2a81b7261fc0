"""Shared helpers for the interop scenarios: tokens, connecting, waiting.

Every scenario reads LK_URL, LK_API_KEY, LK_API_SECRET and LK_ROOM from the
environment, prints one JSON line per result on stdout, and exits non-zero with a
message on stderr when something it checks does not hold.
"""

import asyncio
import json
import os
import sys
import time

from livekit import api, rtc

URL = os.environ.get("LK_URL", "ws://127.0.0.1:7880")
KEY = os.environ.get("LK_API_KEY", "devkey")
SECRET = os.environ.get("LK_API_SECRET", "secret")
ROOM = os.environ.get("LK_ROOM", "interop")


def token(identity, room=ROOM, secret=SECRET, ttl_s=600, update_own_metadata=None, kind=None):
    import datetime

    t = (
        api.AccessToken(KEY, secret)
        .with_identity(identity)
        .with_name(identity.capitalize())
        .with_ttl(datetime.timedelta(seconds=ttl_s))
        .with_grants(api.VideoGrants(room_join=True, room=room,
                                     can_update_own_metadata=update_own_metadata))
    )
    if kind:
        t = t.with_kind(kind)
    return t.to_jwt()


async def connect(identity, room=ROOM, update_own_metadata=None):
    r = rtc.Room()
    await r.connect(URL, token(identity, room, update_own_metadata=update_own_metadata),
                    rtc.RoomOptions(auto_subscribe=False))
    return r


def report(**kv):
    print(json.dumps(kv), flush=True)


def finish(code):
    """Leave the process at once with `code`, after flushing what it printed.

    The official SDK (livekit 1.2.1) sometimes aborts inside its FFI runtime while the
    interpreter shuts down ("panic in a function that cannot unwind", SIGABRT), after
    the scenario has printed its verdict. The verdict is what the tests judge, so a
    scenario leaves through here and never reaches that teardown.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr, flush=True)
    finish(1)


def check(cond, msg):
    if not cond:
        fail(msg)


async def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await asyncio.sleep(0.02)
    fail(f"timed out after {timeout}s waiting for {what}")


async def wait_remote(room, identity, timeout=10):
    await wait_for(lambda: identity in room.remote_participants, timeout, f"{identity} to appear")


async def stay(room, timeout):
    """Stays in `room` until it disconnects or `timeout` seconds pass."""
    done = asyncio.Event()
    room.on("disconnected", lambda *_: done.set())
    try:
        await asyncio.wait_for(done.wait(), timeout)
    except asyncio.TimeoutError:
        pass


def run(main):
    try:
        asyncio.run(asyncio.wait_for(main(), timeout=float(os.environ.get("LK_TIMEOUT", "60"))))
    except asyncio.TimeoutError:
        fail("scenario timed out")
    finish(0)


def serve(main):
    """Runs `main` (a participant that stays until the test kills it), then leaves
    through `finish`."""
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    finish(0)


async def inbound_stats(track):
    """libwebrtc's receive statistics of `track` (NetEq's view: loss, jitter, how much
    it concealed and time-stretched)."""
    out = {}
    for s in await track.get_stats():
        if s.WhichOneof("stats") == "inbound_rtp":
            r = s.inbound_rtp
            for src, names in ((r.received, ("packets_received", "packets_lost", "jitter")),
                               (r.inbound, ("concealed_samples", "silent_concealed_samples",
                                            "concealment_events",
                                            "inserted_samples_for_deceleration",
                                            "removed_samples_for_acceleration",
                                            "jitter_buffer_delay",
                                            "jitter_buffer_emitted_count",
                                            "jitter_buffer_target_delay",
                                            "packets_discarded", "fec_packets_received",
                                            "total_samples_received"))):
                for n in names:
                    try:
                        out[n] = round(float(getattr(src, n)), 4)
                    except AttributeError:
                        pass
    return out
