"""An Outpost assistant for the network tests (tests/tests/livekit_network.rs): one
session over whatever path the client's network leaves (ICE over TCP when UDP is
blocked, a TURN relay when only TLS gets through), with everything a session carries.

It joins as LK_IDENTITY ("assistant", kind agent; examples/python-agent/agent.py's
`Outpost` class speaks the protocol), waits for OUTPOST_IDENTITY's hello, then:

1. an Outpost-protocol tool call: calculator 6*7, expects 42;
2. a LiveKit RPC tool call, as a LiveKit Agents agent forwards one: calculator 2+3 by
   `perform_rpc`, expects {"answer": 5};
3. voice both ways: publishes a 440 Hz tone (the client checks it) and records the
   client's microphone track, which must carry its 660 Hz tone without gaps;
4. says "network checks done" and waits for the client to leave.

Prints one JSON line per step ({"step", "ok", ...}) and {"event": "done", "failures"};
exits 1 when a step failed. Environment: LK_URL, LK_ROOM, LK_API_KEY, LK_API_SECRET,
LK_IDENTITY, OUTPOST_IDENTITY, LK_TIMEOUT (seconds, default 120).
"""

import asyncio
import json
import os
import sys

import numpy as np
from livekit import rtc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python-agent"))

import audio_tone  # noqa: E402
from agent import Outpost, log, mint_token  # noqa: E402
from lkcommon import finish  # noqa: E402

URL = os.environ.get("LK_URL", "ws://127.0.0.1:7880")
ROOM = os.environ.get("LK_ROOM", "outpost")
IDENTITY = os.environ.get("LK_IDENTITY", "assistant")
CLIENT = os.environ.get("OUTPOST_IDENTITY", "app")
TIMEOUT = float(os.environ.get("LK_TIMEOUT", "120"))
CLIENT_TONE_HZ = 660.0


async def client_track(room):
    """The client's first audio publication, subscribed."""
    for _ in range(300):
        p = room.remote_participants.get(CLIENT)
        pubs = [x for x in (p.track_publications.values() if p else [])
                if x.kind == rtc.TrackKind.KIND_AUDIO]
        if pubs:
            pub = pubs[0]
            pub.set_subscribed(True)
            for _ in range(100):
                if pub.track is not None:
                    return pub.track
                await asyncio.sleep(0.1)
        await asyncio.sleep(0.1)
    raise RuntimeError(f"{CLIENT} published no audio track within 30 s")


def tone_windows(samples, freq):
    """Per 20 ms window: whether the tone at `freq` dominates it."""
    win = audio_tone.RATE // 50
    out = []
    for i in range(len(samples) // win):
        w = samples[i * win:(i + 1) * win]
        rms = float(np.sqrt(np.mean(w * w)))
        spec = np.abs(np.fft.rfft(w * np.hanning(len(w))))
        freqs = np.fft.rfftfreq(len(w), 1 / audio_tone.RATE)
        near = spec[(freqs > freq * 0.8) & (freqs < freq * 1.2)].sum()
        out.append(rms > 1000 and near > 0.5 * spec.sum())
    return out


async def main():
    room = rtc.Room()
    op = Outpost(room, "Network test assistant")
    await room.connect(URL, mint_token(IDENTITY, ROOM), rtc.RoomOptions(auto_subscribe=False))
    log(event="ready", identity=IDENTITY)
    await asyncio.wait_for(op.welcomed.wait(), 60)
    failures = 0

    def step(name, ok, **kv):
        nonlocal failures
        failures += 0 if ok else 1
        log(step=name, ok=ok, **kv)

    # 1. Outpost protocol.
    rid = await op.request("calculator", {"expression": "6*7"})
    got = await op.result(rid, 30)
    answer = (got[0].get("result") or {}).get("answer") if got else None
    step("protocol_tool", answer == 42, answer=answer, via=got[1] if got else None)

    # 2. LiveKit RPC.
    try:
        reply = await room.local_participant.perform_rpc(
            destination_identity=CLIENT, method="calculator",
            payload=json.dumps({"expression": "2+3"}), response_timeout=30)
        step("rpc_tool", json.loads(reply).get("answer") == 5, reply=reply)
    except rtc.RpcError as e:
        step("rpc_tool", False, code=e.code, message=e.message)

    # 3. Voice both ways.
    source, _track, pub = await audio_tone.publish(room)
    tone = audio_tone.Tone(source, 440.0)
    log(event="tone_published", sid=pub.sid)
    try:
        track = await client_track(room)
        samples, arrivals = await audio_tone.record(track, 4.0)
        ok = tone_windows(samples, CLIENT_TONE_HZ)
        first = next((i for i, v in enumerate(ok) if v), None)
        longest = run = 0
        for v in ok[first or 0:]:
            run = 0 if v else run + 1
            longest = max(longest, run)
        freq = audio_tone.peak_hz(samples[(first or 0) * (audio_tone.RATE // 50):])
        step("hear_client", first is not None and abs(freq - CLIENT_TONE_HZ) < 13 and longest * 20 < 200,
             freq_hz=round(freq, 1), tone_start_ms=(first or 0) * 20, longest_gap_ms=longest * 20)
    except Exception as e:  # noqa: BLE001 - reported to the test
        step("hear_client", False, error=repr(e))

    await op.say("network checks done")
    log(event="done", failures=failures)
    # Keep the tone going until the client has heard it and leaves.
    for _ in range(int(TIMEOUT * 10)):
        if CLIENT not in room.remote_participants:
            break
        await asyncio.sleep(0.1)
    await tone.stop()
    await room.disconnect()
    finish(1 if failures else 0)


try:
    asyncio.run(asyncio.wait_for(main(), TIMEOUT))
except asyncio.TimeoutError:
    log(event="timeout", seconds=TIMEOUT)
    finish(2)
