"""Audio through outpost-room between two official-SDK peers.

alice publishes a 440 Hz sine (rtc.AudioSource -> LocalAudioTrack); bob, who joined
with auto-subscribe, receives it through rtc.AudioStream and checks, over
LK_TONE_SECONDS (10 by default):
- the frequency: the FFT peak of the whole recording within 2 % of 440 Hz;
- continuity: every 20 ms window after the tone starts carries the tone (its spectral
  peak within 2 % of 440 Hz and energy well above silence), so a stretch of lost
  packets shows up as windows without it; the longest such stretch and the longest
  gap between frame arrivals must both stay under 100 ms.
alice's publication must learn that it has a subscriber (TrackSubscribed, what LiveKit
Agents waits for before it speaks). Then alice mutes and unmutes (bob sees track_muted / track_unmuted), unpublishes (bob
sees track_unpublished), publishes again (bob hears the tone again), and leaves (bob
sees the track unpublished and alice disconnected).
"""

import asyncio
import math
import os
import time

import numpy as np
from livekit import rtc

from lkcommon import URL, check, fail, report, run, token, wait_for

RATE = 48000
FREQ = 440.0
SECONDS = float(os.environ.get("LK_TONE_SECONDS", "10"))
FRAME = RATE // 100  # 10 ms


async def join(identity, auto_subscribe):
    r = rtc.Room()
    await r.connect(URL, token(identity), rtc.RoomOptions(auto_subscribe=auto_subscribe))
    return r


class Tone:
    """A sine (440 Hz by default) pushed into an AudioSource in real time, phase-continuous."""

    def __init__(self, source, freq=FREQ, frame=FRAME):
        self.source = source
        self.freq = freq
        self.frame = frame
        self.n = 0
        self.task = asyncio.create_task(self.run())

    async def run(self):
        size = self.frame
        frame = rtc.AudioFrame.create(RATE, 1, size)
        buf = np.frombuffer(frame.data, dtype=np.int16)
        while True:
            t = (self.n + np.arange(size)) / RATE
            buf[:] = (0.5 * 32767 * np.sin(2 * math.pi * self.freq * t)).astype(np.int16)
            self.n += size
            # capture_frame waits while the source's queue is full: real-time pacing.
            await self.source.capture_frame(frame)

    async def stop(self):
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


class Player:
    """Silence pushed into an AudioSource in real time, with `play(samples)` putting a
    clip in its place once; the future it returns is done when the clip has gone out."""

    def __init__(self, source):
        self.source = source
        self.clip = np.zeros(0)
        self.done = None
        self.task = asyncio.create_task(self.run())

    def play(self, samples):
        self.clip = np.asarray(samples, dtype=np.float64)
        self.done = asyncio.get_running_loop().create_future()
        return self.done

    async def run(self):
        frame = rtc.AudioFrame.create(RATE, 1, FRAME)
        buf = np.frombuffer(frame.data, dtype=np.int16)
        while True:
            n = min(FRAME, len(self.clip))
            buf[:n] = np.clip(self.clip[:n], -32768, 32767).astype(np.int16)
            buf[n:] = 0
            self.clip = self.clip[n:]
            await self.source.capture_frame(frame)
            if n and not len(self.clip) and self.done and not self.done.done():
                self.done.set_result(None)

    async def stop(self):
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


async def publish(room):
    source = rtc.AudioSource(RATE, 1)
    track = rtc.LocalAudioTrack.create_audio_track("tone", source)
    opts = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
    pub = await room.local_participant.publish_track(track, opts)
    return source, track, pub


async def record(track, seconds):
    """Samples and per-frame arrival times for `seconds` after the first frame."""
    stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
    chunks, arrivals = [], []
    start = None
    async for ev in stream:
        now = time.monotonic()
        if start is None:
            start = now
        chunks.append(np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64))
        arrivals.append(now)
        if now - start >= seconds:
            break
    await stream.aclose()
    return np.concatenate(chunks), np.array(arrivals)


def peak_hz(x):
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    spec[0] = 0
    return float(np.argmax(spec)) * RATE / len(x)


def analyse(samples, arrivals):
    win = RATE // 50  # 20 ms
    n = len(samples) // win
    ok = []
    for i in range(n):
        w = samples[i * win:(i + 1) * win]
        rms = float(np.sqrt(np.mean(w * w)))
        # 20 ms gives 50 Hz bins: look at the energy near 440 Hz instead of the argmax.
        spec = np.abs(np.fft.rfft(w * np.hanning(len(w))))
        freqs = np.fft.rfftfreq(len(w), 1 / RATE)
        near = spec[(freqs > FREQ * 0.8) & (freqs < FREQ * 1.2)].sum()
        ok.append(rms > 1000 and near > 0.5 * spec.sum())
    first = next((i for i, v in enumerate(ok) if v), None)
    check(first is not None, "bob never heard the tone")
    longest = run_ = 0
    for v in ok[first:]:
        run_ = 0 if v else run_ + 1
        longest = max(longest, run_)
    heard = samples[first * win:]
    freq = peak_hz(heard)
    gaps = np.diff(arrivals) if len(arrivals) > 1 else np.array([0.0])
    return {
        "freq_hz": round(freq, 2),
        "tone_start_ms": first * 20,
        "longest_gap_ms": longest * 20,
        "max_arrival_gap_ms": round(float(gaps.max()) * 1000, 1),
        # Where the longest arrival gap ended, in seconds from the first frame.
        "max_arrival_gap_at_s": round(float(arrivals[int(gaps.argmax()) + 1] - arrivals[0]), 2)
        if len(arrivals) > 1 else 0.0,
        "heard_s": round(len(heard) / RATE, 2),
    }


async def main():
    bob = await join("bob", auto_subscribe=True)
    events = []
    subscribed = []
    bob.on("track_subscribed", lambda t, pub, p: subscribed.append(t))
    bob.on("track_muted", lambda p, pub: events.append(("muted", p.identity, pub.sid)))
    bob.on("track_unmuted", lambda p, pub: events.append(("unmuted", p.identity, pub.sid)))
    bob.on("track_unpublished", lambda pub, p: events.append(("unpublished", p.identity, pub.sid)))
    bob.on("participant_disconnected", lambda p: events.append(("left", p.identity, "")))

    alice = await join("alice", auto_subscribe=False)
    source, track, pub = await publish(alice)
    tone = Tone(source)
    # alice is told that her track has a subscriber (TrackSubscribed), once bob's
    # answer has bound it: bob has the track by then.
    try:
        await asyncio.wait_for(pub.wait_for_subscription(), 15)
    except asyncio.TimeoutError:
        fail("alice was never told that bob subscribed (TrackSubscribed)")
    bob_had_it = bool(subscribed)
    await wait_for(lambda: subscribed, 15, "bob to subscribe to alice's track")
    check(subscribed[0].kind == rtc.TrackKind.KIND_AUDIO, f"subscribed a {subscribed[0].kind}")
    rp = bob.remote_participants["alice"]
    rpub = rp.track_publications[pub.sid]
    check(rpub.source == rtc.TrackSource.SOURCE_MICROPHONE, f"source {rpub.source}")
    # outpost-room forwards Opus; livekit-server negotiates RED between two SDKs
    # (LK_TONE_MIMES="audio/opus,audio/red" there).
    mimes = os.environ.get("LK_TONE_MIMES", "audio/opus").split(",")
    check(rpub.mime_type in mimes, f"mime {rpub.mime_type!r}")

    samples, arrivals = await record(subscribed[0], SECONDS)
    res = analyse(samples, arrivals)
    check(abs(res["freq_hz"] - FREQ) <= FREQ * 0.02, f"heard {res}")
    check(res["longest_gap_ms"] < 100, f"the tone had a gap: {res}")
    check(res["max_arrival_gap_ms"] < 100, f"frames stalled: {res}")
    check(res["heard_s"] >= SECONDS - 1.0, f"heard too little: {res}")

    # Mute and unmute, seen by bob.
    track.mute()
    await wait_for(lambda: ("muted", "alice", pub.sid) in events, 10, "bob to see the mute")
    track.unmute()
    await wait_for(lambda: ("unmuted", "alice", pub.sid) in events, 10, "bob to see the unmute")

    # Unpublish, then publish again: bob sees it go and hears the new one.
    await alice.local_participant.unpublish_track(pub.sid)
    await wait_for(lambda: ("unpublished", "alice", pub.sid) in events, 10,
                   "bob to see the unpublish")
    await tone.stop()
    subscribed.clear()
    source2, track2, pub2 = await publish(alice)
    tone = Tone(source2)
    await wait_for(lambda: subscribed, 15, "bob to subscribe to the republished track")
    samples, arrivals = await record(subscribed[0], 2.0)
    res2 = analyse(samples, arrivals)
    check(abs(res2["freq_hz"] - FREQ) <= FREQ * 0.02, f"after republish heard {res2}")

    # Leave: the track goes with alice.
    await tone.stop()
    await alice.disconnect()
    await wait_for(lambda: ("unpublished", "alice", pub2.sid) in events, 10,
                   "bob to see the track unpublished when alice left")
    await wait_for(lambda: ("left", "alice", "") in events, 10, "bob to see alice leave")
    report(scenario="audio_tone", ok=True, **res, republished_freq_hz=res2["freq_hz"],
           subscriber_had_track_when_publisher_was_told=bob_had_it)
    await bob.disconnect()


if __name__ == "__main__":
    run(main)
