"""The official-SDK sides of the mouth-to-ear benchmark (tests/src/bin/voice_bench.rs).

ROLE=echo: the echo agent. Joins LK_ROOM as LK_IDENTITY, publishes one audio track
("echo") and re-publishes into it, frame by frame as the SDK's AudioStream plays them
out, whatever audio it is subscribed to (one client at a time is in its room).

ROLE=client: the official-SDK client of the SDK-pair loop. Joins as LK_IDENTITY,
publishes a microphone track, and waits for the echo's track. Then, with input and
output at the SDK's frame boundary (AudioSource.capture_frame in, AudioStream frames
out: no sound devices), it plays silence with BURSTS tone bursts (60 ms of 1 kHz at
half scale) every SPACING_MS, paced by the wall clock in 10 ms frames, and records the
echo. Latency of a burst = the time its first sample is heard back (the output frame's
arrival plus the sample's offset in it) minus the time its first input frame was
captured. Also its own CPU time (all threads: the SDK's native ones too) over the
bursts. Prints one JSON line.
"""

import asyncio
import json
import os
import time

import numpy as np
from livekit import rtc

from lkcommon import URL, finish, token

RATE = 48000
FRAME = RATE // 100  # 10 ms, the SDK's usual frame
BURST_S = 0.06
FREQ = 1000.0
AMP = 0.5 * 32767
THRESHOLD = 0.2 * AMP  # an output sample this loud starts a heard burst
IDENTITY = os.environ.get("LK_IDENTITY", "echo")
ROOM = os.environ.get("LK_ROOM", "voice")


def cpu_seconds():
    """User + system CPU of this process, all threads."""
    t = os.times()
    return t.user + t.system


async def echo():
    room = rtc.Room()
    # A short queue: what the echo hears goes out at once, and a burst at a client's
    # start cannot leave a standing delay in the queue for the rest of the turn.
    source = rtc.AudioSource(RATE, 1, queue_size_ms=60)
    track = rtc.LocalAudioTrack.create_audio_track("echo", source)

    async def pump(t):
        stream = rtc.AudioStream(t, sample_rate=RATE, num_channels=1)
        async for ev in stream:
            await source.capture_frame(ev.frame)

    def on_sub(t, pub, p):
        if t.kind == rtc.TrackKind.KIND_AUDIO:
            asyncio.ensure_future(pump(t))

    room.on("track_subscribed", on_sub)
    await room.connect(URL, token(IDENTITY, ROOM), rtc.RoomOptions(auto_subscribe=True))
    await room.local_participant.publish_track(
        track, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    print("ready", flush=True)
    await asyncio.Event().wait()


async def client():
    bursts = int(os.environ.get("BURSTS", "15"))
    spacing = float(os.environ.get("SPACING_MS", "500")) / 1000
    settle = float(os.environ.get("SETTLE_S", "2"))
    room = rtc.Room()
    got = asyncio.get_running_loop().create_future()

    def on_sub(t, pub, p):
        if t.kind == rtc.TrackKind.KIND_AUDIO and not got.done():
            got.set_result(t)

    room.on("track_subscribed", on_sub)
    await room.connect(URL, token(IDENTITY, ROOM), rtc.RoomOptions(auto_subscribe=True))
    source = rtc.AudioSource(RATE, 1)
    mic = rtc.LocalAudioTrack.create_audio_track("microphone", source)
    await room.local_participant.publish_track(
        mic, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    heard_track = await asyncio.wait_for(got, 20)

    onsets_out = []
    state = {"loud": False, "quiet_since": None}

    async def listen():
        stream = rtc.AudioStream(heard_track, sample_rate=RATE, num_channels=1)
        async for ev in stream:
            now = time.monotonic()
            x = np.abs(np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64))
            loud = np.nonzero(x > THRESHOLD)[0]
            if len(loud) and not state["loud"]:
                onsets_out.append(now + loud[0] / RATE)
                state["loud"] = True
            if len(loud):
                state["quiet_since"] = None
            elif state["loud"]:
                # Quiet for 100 ms ends a burst.
                state["quiet_since"] = state["quiet_since"] or now
                if now - state["quiet_since"] > 0.1:
                    state["loud"] = False

    listener = asyncio.ensure_future(listen())
    frame = rtc.AudioFrame.create(RATE, 1, FRAME)
    buf = np.frombuffer(frame.data, dtype=np.int16)
    burst_frames = int(BURST_S * RATE) // FRAME
    t = np.arange(FRAME) / RATE
    onsets_in = []
    start = time.monotonic()
    n = 0
    total = int((settle + bursts * spacing + 1.0) * 100)
    every = int(spacing * 100)
    first = int(settle * 100)
    cpu0 = wall0 = None
    for n in range(total):
        # Wall-clock pacing, 10 ms a frame.
        due = start + n * 0.01
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        k = n - first
        if n == first:
            cpu0, wall0 = cpu_seconds(), time.monotonic()
        if 0 <= k < bursts * every and k % every < burst_frames:
            phase = (k % every) * FRAME / RATE
            buf[:] = (AMP * np.sin(2 * np.pi * FREQ * (t + phase))).astype(np.int16)
            if k % every == 0:
                onsets_in.append(time.monotonic())
        else:
            buf[:] = 0
        await source.capture_frame(frame)
    cpu = cpu_seconds() - cpu0
    wall = time.monotonic() - wall0
    listener.cancel()
    # How long libwebrtc's NetEq held the echo's audio on average (its playout delay).
    jb_ms = None
    for st in await heard_track.get_stats():
        if st.WhichOneof("stats") == "inbound_rtp":
            i = st.inbound_rtp.inbound
            if i.jitter_buffer_emitted_count:
                jb_ms = 1000 * i.jitter_buffer_delay / i.jitter_buffer_emitted_count
    lat = []
    for o in onsets_out:
        before = [i for i in onsets_in if i <= o]
        if before:
            lat.append((o - before[-1]) * 1000)
    print(json.dumps({"latencies_ms": lat, "sent": len(onsets_in), "cpu_s": cpu,
                      "wall_s": wall, "receiver_delay_ms": jb_ms}), flush=True)
    await room.disconnect()


if __name__ == "__main__":
    role = os.environ.get("ROLE")
    try:
        asyncio.run(echo() if role == "echo" else client())
    except KeyboardInterrupt:
        pass
    finish(0)
