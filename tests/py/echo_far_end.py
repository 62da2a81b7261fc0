"""The far end of Outpost's echo cancellation test (tests/tests/voice_echo_e2e.rs).

Joins as LK_IDENTITY with the official SDK, publishes speech (the WAV FAR_WAV, looped, in
real time: Outpost plays it on its speaker, whose sound the test loops into Outpost's
microphone) and records what Outpost's microphone track (OUTPOST_IDENTITY) carries for
RECORD_SECONDS: the samples (raw 48 kHz mono s16le) to OUT, and each 10 ms frame's
arrival time (Unix seconds, one a line) to OUT.times, so the test can cut the recording
by its own clock. Prints {"op": "ready"}, {"op": "recording"} and {"op": "done"}.
"""

import asyncio
import os
import time

import numpy as np
from livekit import rtc

import speech
from lkcommon import URL, report, run, token

RATE = 48000
FRAME = RATE // 100
APP = os.environ.get("OUTPOST_IDENTITY", "outpost-user")
ME = os.environ.get("LK_IDENTITY", "far-end")
SECONDS = float(os.environ.get("RECORD_SECONDS", "40"))
OUT = os.environ["OUT"]


async def talk(source, x):
    frame = rtc.AudioFrame.create(RATE, 1, FRAME)
    buf = np.frombuffer(frame.data, dtype=np.int16)
    n = 0
    while True:
        idx = (n + np.arange(FRAME)) % len(x)
        buf[:] = x[idx].astype(np.int16)
        n += FRAME
        await source.capture_frame(frame)


async def main():
    rate, x = speech.read_wav(os.environ["FAR_WAV"])
    if rate != RATE:
        x = speech.resample(x, rate, RATE)
    x = np.clip(np.round(x), -32768, 32767)
    room = rtc.Room()
    mic = asyncio.get_running_loop().create_future()

    @room.on("track_subscribed")
    def on_track(track, pub, participant):
        if participant.identity == APP and track.kind == rtc.TrackKind.KIND_AUDIO and not mic.done():
            mic.set_result(track)

    await room.connect(URL, os.environ.get("LK_TOKEN") or token(ME),
                       rtc.RoomOptions(auto_subscribe=True))
    source = rtc.AudioSource(RATE, 1)
    voice = rtc.LocalAudioTrack.create_audio_track("far-end-voice", source)
    await room.local_participant.publish_track(
        voice, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    talking = asyncio.create_task(talk(source, x))
    report(op="ready")

    track = await asyncio.wait_for(mic, 90)
    stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
    report(op="recording")
    want = int(SECONDS * RATE)
    got = 0
    with open(OUT, "wb") as out, open(OUT + ".times", "w") as times:
        async for ev in stream:
            data = np.frombuffer(ev.frame.data, dtype=np.int16)
            out.write(data.astype("<i2").tobytes())
            times.write(f"{time.time():.4f} {len(data)}\n")
            got += len(data)
            if got >= want:
                break
    await stream.aclose()
    talking.cancel()
    report(op="done", samples=got)
    await room.disconnect()


if __name__ == "__main__":
    run(main)
