"""A voice agent for Outpost's voice end-to-end test (tests/tests/voice_e2e.rs).

Joins as LK_IDENTITY with the official SDK, says it is listening (lk.agent.state),
publishes its own voice (a 660 Hz tone, phase-continuous, real time), and waits for
Outpost's microphone track (OUTPOST_IDENTITY). It records what Outpost sends and
checks it is the 440 Hz tone the test plays into Outpost's microphone (the FFT peak
within 2 %), then transcribes "the user's speech" on lk.transcription for Outpost's
track (lk.transcribed_track_id = that track's sid; two pieces, then the end) and its
own speech for its own track. It keeps talking for LK_TALK_SECONDS more so the test can
record Outpost's speaker, prints {"op": "done"} and leaves.

With LK_KEEP_LISTENING=1 it also answers text on lk.chat ("You typed: ...", as an
agent's final transcript) and keeps listening to every microphone track Outpost
publishes (a track published again after a rejoin included): each second of sound it
hears is reported as {"op": "hearing", "n": total so far, "track": sid, "freq_hz": ...}.
"""

import asyncio
import math
import os

import numpy as np
from livekit import rtc

from lkcommon import URL, check, report, run, token

RATE = 48000
FRAME = RATE // 100
APP = os.environ.get("OUTPOST_IDENTITY", "outpost-user")
ME = os.environ.get("LK_IDENTITY", "voice-agent")
TALK = float(os.environ.get("LK_TALK_SECONDS", "8"))
USER_WORDS = ["Hello", " agent"]
AGENT_WORDS = "I hear you."
KEEP_LISTENING = os.environ.get("LK_KEEP_LISTENING") == "1"
hearing = {"n": 0}


async def listen(track, sid):
    """Reports each second of sound on `track` (LK_KEEP_LISTENING)."""
    stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
    loud = []
    async for ev in stream:
        x = np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64)
        if np.sqrt(np.mean(x * x)) > 500:
            loud.append(x)
        if sum(len(v) for v in loud) >= RATE:
            hearing["n"] += 1
            report(op="hearing", n=hearing["n"], track=sid,
                   freq_hz=round(peak_hz(np.concatenate(loud)), 1))
            loud = []


async def tone(source, freq):
    frame = rtc.AudioFrame.create(RATE, 1, FRAME)
    buf = np.frombuffer(frame.data, dtype=np.int16)
    n = 0
    while True:
        t = (n + np.arange(FRAME)) / RATE
        buf[:] = (0.4 * 32767 * np.sin(2 * math.pi * freq * t)).astype(np.int16)
        n += FRAME
        await source.capture_frame(frame)


def peak_hz(x):
    spec = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    spec[0] = 0
    return float(np.argmax(spec)) * RATE / len(x)


async def main():
    room = rtc.Room()
    mic = asyncio.get_running_loop().create_future()

    @room.on("track_subscribed")
    def on_track(track, pub, participant):
        if participant.identity == APP and track.kind == rtc.TrackKind.KIND_AUDIO:
            report(op="subscribed", track=pub.sid)
            if KEEP_LISTENING:
                asyncio.ensure_future(listen(track, pub.sid))
            if not mic.done():
                mic.set_result((track, pub.sid))

    async def answer(reader, sender):
        text = await reader.read_all()
        report(op="chat", text=text, sender=sender)
        await room.local_participant.send_text(
            f"You typed: {text}", topic="lk.transcription", destination_identities=[APP],
            attributes={"lk.segment_id": f"SG_chat_{len(text)}_{hearing['n']}",
                        "lk.transcription_final": "true", "lk.transcribed_track_id": voice_sid[0]})

    voice_sid = [""]
    if KEEP_LISTENING:
        room.register_text_stream_handler(
            "lk.chat", lambda r, s: asyncio.ensure_future(answer(r, s)))

    @room.on("track_published")
    def on_published(pub, participant):
        report(op="seen-track", who=participant.identity, track=pub.sid, muted=pub.muted)

    # What the server says of the app's mute switch (a failure's report shows it).
    @room.on("track_muted")
    def on_muted(participant, pub):
        report(op="muted", who=participant.identity, track=pub.sid)

    @room.on("track_unmuted")
    def on_unmuted(participant, pub):
        report(op="unmuted", who=participant.identity, track=pub.sid)

    # LK_TOKEN (e.g. minted with the agent kind, so the app finds its assistant), else a
    # plain participant's token.
    tok = os.environ.get("LK_TOKEN") or token(ME)
    await room.connect(URL, tok, rtc.RoomOptions(auto_subscribe=True))
    await room.local_participant.set_attributes({"lk.agent.state": "listening"})
    # Its voice, published at once like an agent's (Outpost plays it on its speaker).
    source = rtc.AudioSource(RATE, 1)
    voice = rtc.LocalAudioTrack.create_audio_track("agent-voice", source)
    pub = await room.local_participant.publish_track(
        voice, rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE))
    talking = asyncio.create_task(tone(source, 660.0))
    voice_sid[0] = pub.sid
    report(op="ready", track=pub.sid)

    track, mic_sid = await asyncio.wait_for(mic, 60)
    report(op="mic", track=mic_sid)
    stream = rtc.AudioStream(track, sample_rate=RATE, num_channels=1)
    heard = []
    got = 0
    async for ev in stream:
        x = np.frombuffer(ev.frame.data, dtype=np.int16).astype(np.float64)
        # Count only what carries sound: the track is muted until Outpost sends.
        if np.sqrt(np.mean(x * x)) > 500:
            heard.append(x)
            got += len(x)
        if got >= RATE * 2:
            break
    await stream.aclose()
    x = np.concatenate(heard)
    freq = peak_hz(x)
    rms = float(np.sqrt(np.mean(x * x)))
    report(op="heard", freq_hz=round(freq, 1), rms=round(rms, 1))
    check(abs(freq - 440.0) <= 440.0 * 0.02, f"Outpost's microphone carried {freq:.1f} Hz, not 440 Hz")

    await room.local_participant.set_attributes({"lk.agent.state": "thinking"})
    # As LiveKit Agents does: the user's transcript is sent with the user's identity as
    # sender (on their behalf), tied to their track.
    w = await room.local_participant.stream_text(
        topic="lk.transcription", destination_identities=[APP], sender_identity=APP,
        attributes={"lk.segment_id": "SG_user_1", "lk.transcription_final": "false",
                    "lk.transcribed_track_id": mic_sid})
    for piece in USER_WORDS:
        await w.write(piece)
        await asyncio.sleep(0.3)
    await w.aclose()
    await room.local_participant.set_attributes({"lk.agent.state": "speaking"})
    await room.local_participant.send_text(
        AGENT_WORDS, topic="lk.transcription", destination_identities=[APP],
        attributes={"lk.segment_id": "SG_agent_1", "lk.transcription_final": "true",
                    "lk.transcribed_track_id": pub.sid})
    report(op="transcribed")
    await asyncio.sleep(TALK)
    talking.cancel()
    report(op="done")
    await room.disconnect()


if __name__ == "__main__":
    run(main)
