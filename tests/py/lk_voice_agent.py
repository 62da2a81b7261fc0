"""A real LiveKit Agents voice agent (PyPI `livekit-agents`, run with the .venv-agents
python) for Outpost's voice tests, with scripted speech plugins instead of models (no
network):

- STT: a subclass of the framework's own `stt.STT` (not streaming: the framework wraps
  it in its `stt.StreamAdapter` with the VAD, so it is asked to recognise each stretch of
  speech once the VAD says it ended). It reports what it was given (seconds, loudness)
  and answers a fixed transcript, LK_USER_TRANSCRIPT.
- VAD: the framework's bundled Silero VAD (`inference.VAD`, which runs offline from the
  `livekit-local-inference` wheel).
- LLM: a subclass of `llm.LLM` that answers LK_REPLY to whatever the user said.
- TTS: a subclass of `tts.TTS` (not streaming) whose audio is `espeak-ng`'s (Debian) for
  the text it is given, at espeak-ng's 22.05 kHz.

It joins the room itself (no worker) and runs an `AgentSession` with the room's audio in
and out (`room_io`: it listens to OUTPOST_IDENTITY's microphone, publishes its voice and
sends both transcripts on `lk.transcription`, the agent's in step with its audio).

Environment: LK_URL, LK_TOKEN, OUTPOST_IDENTITY, LK_TIMEOUT (seconds), LK_USER_TRANSCRIPT,
LK_REPLY. Prints JSON lines on stdout: {"event": "ready"}, {"event": "mic"} (Outpost's microphone subscribed),
{"event": "stt", "seconds",
"rms"}, {"event": "user_transcript", ...}, {"event": "tts", "text", "seconds"},
{"event": "state", "state"}, {"event": "said", "role", "text"}.
"""

from __future__ import annotations

import asyncio
import io
import os
import wave

import numpy as np
from livekit import rtc
from livekit.agents import (
    Agent,
    AgentSession,
    inference,
    llm,
    room_io,
    stt,
    tts,
    utils,
)
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN
from lkcommon import report, stay

URL = os.environ.get("LK_URL", "")
TOKEN = os.environ.get("LK_TOKEN", "")
OUTPOST = os.environ.get("OUTPOST_IDENTITY", "app")
TIMEOUT = float(os.environ.get("LK_TIMEOUT", "150"))
USER_TRANSCRIPT = os.environ.get("LK_USER_TRANSCRIPT", "Hello agent")
REPLY = os.environ.get("LK_REPLY", "I hear you loud and clear.")
ESPEAK_RATE = 22050



class ScriptedSTT(stt.STT):
    """Hears a stretch of speech (as the VAD cut it) and answers the fixed transcript."""

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))

    async def _recognize_impl(self, buffer, *, language=NOT_GIVEN, conn_options=DEFAULT_API_CONNECT_OPTIONS):
        frame = rtc.combine_audio_frames(buffer) if isinstance(buffer, list) else buffer
        x = np.frombuffer(frame.data, dtype=np.int16).astype(np.float64)
        seconds = frame.samples_per_channel / max(frame.sample_rate, 1)
        rms = float(np.sqrt(np.mean(x * x))) if len(x) else 0.0
        report(event="stt", seconds=round(seconds, 3), rms=round(rms, 1))
        return stt.SpeechEvent(
            type=stt.SpeechEventType.FINAL_TRANSCRIPT,
            alternatives=[stt.SpeechData(language="en", text=USER_TRANSCRIPT, confidence=1.0)],
        )


class EspeakStream(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        proc = await asyncio.create_subprocess_exec(
            "espeak-ng", "--stdout", "-v", "en", "-s", "150", self.input_text,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"espeak-ng failed: {err.decode(errors='replace')}")
        with wave.open(io.BytesIO(out)) as w:
            rate, pcm = w.getframerate(), w.readframes(w.getnframes())
        if rate != ESPEAK_RATE or not pcm:
            raise RuntimeError(f"espeak-ng gave {len(pcm)} bytes at {rate} Hz")
        report(event="tts", text=self.input_text, seconds=round(len(pcm) / 2 / rate, 3))
        output_emitter.initialize(
            request_id=utils.shortuuid(), sample_rate=rate, num_channels=1,
            mime_type="audio/pcm",
        )
        output_emitter.push(pcm)
        output_emitter.flush()


class EspeakTTS(tts.TTS):
    def __init__(self) -> None:
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=False), sample_rate=ESPEAK_RATE,
            num_channels=1,
        )

    def synthesize(self, text, *, conn_options=DEFAULT_API_CONNECT_OPTIONS):
        return EspeakStream(tts=self, input_text=text, conn_options=conn_options)


class ReplyStream(llm.LLMStream):
    async def _run(self) -> None:
        for i, word in enumerate(REPLY.split(" ")):
            piece = word if i == 0 else " " + word
            self._event_ch.send_nowait(
                llm.ChatChunk(id="scripted", delta=llm.ChoiceDelta(role="assistant", content=piece)))
            await asyncio.sleep(0.02)


class ReplyLLM(llm.LLM):
    def chat(self, *, chat_ctx, tools=None, conn_options=DEFAULT_API_CONNECT_OPTIONS, **_kw):
        return ReplyStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)


async def main() -> None:
    room = rtc.Room()

    @room.on("track_subscribed")
    def _on_track(track, pub, participant):
        if participant.identity == OUTPOST and track.kind == rtc.TrackKind.KIND_AUDIO:
            report(event="mic", track=pub.sid)

    await room.connect(URL, TOKEN, rtc.RoomOptions(auto_subscribe=True))
    session = AgentSession(
        stt=ScriptedSTT(), vad=inference.VAD(model="silero"), llm=ReplyLLM(), tts=EspeakTTS(),
        turn_handling={"turn_detection": "vad", "interruption": {"enabled": False}},
    )

    @session.on("user_input_transcribed")
    def _on_user(ev):
        report(event="user_transcript", text=ev.transcript, final=ev.is_final)

    @session.on("agent_state_changed")
    def _on_state(ev):
        report(event="state", state=ev.new_state)

    @session.on("conversation_item_added")
    def _on_item(ev):
        item = ev.item
        if isinstance(item, llm.ChatMessage):
            report(event="said", role=item.role, text=item.text_content)

    await session.start(
        Agent(instructions="You are a test agent."),
        room=room,
        room_options=room_io.RoomOptions(
            audio_input=True, audio_output=True, text_input=True, text_output=True,
            participant_identity=OUTPOST,
        ),
    )
    report(event="ready")
    await stay(room, TIMEOUT)
    await session.aclose()
    await room.disconnect()


if __name__ == "__main__":
    asyncio.run(main())
