"""A LiveKit Agents worker as its developers run it (PyPI `livekit-agents`, the .venv-agents
python): an `AgentServer` started with the framework's CLI in `start` mode, registered with
livekit-server and dispatched to rooms by it, for Outpost's end-to-end tests.

Dispatch: automatic (every new room) without LK_AGENT_NAME, explicit with it (the room's
creator names the agent: a token's `roomConfig.agents`, as Outpost asks its token endpoint
for, or a dev token Outpost mints from an API key with the same dispatch).

Each job waits for Outpost, discovers its tools (examples/livekit-agents/outpost_tools.py)
and runs an AgentSession with text and voice both ways: the scripted LLM of lk_agent.py
("hello", "read PATH", "calculate EXPR", ...; anything else is echoed), and the scripted
speech plugins of lk_voice_agent.py (Silero VAD offline, a fixed STT transcript,
espeak-ng TTS).

Environment: LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET (the framework's own),
LK_AGENT_NAME, LK_EVENTS (a file: JSON lines of what each job did, since jobs run in their
own processes), LK_USER_TRANSCRIPT, LK_REPLY, LK_TIMEOUT.
Run: lk_worker.py start
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "examples" / "livekit-agents"))

from livekit import rtc  # noqa: E402
from livekit.agents import (  # noqa: E402
    Agent,
    AgentServer,
    AgentSession,
    JobContext,
    cli,
    inference,
    llm,
    room_io,
)

import outpost_tools  # noqa: E402
from lk_agent import ScriptedLLM  # noqa: E402
from lk_voice_agent import EspeakTTS, ScriptedSTT  # noqa: E402

AGENT_NAME = os.environ.get("LK_AGENT_NAME", "")
EVENTS = os.environ.get("LK_EVENTS", "")


def report(**kv):
    line = json.dumps(kv)
    print(line, flush=True)
    if EVENTS:
        with open(EVENTS, "a", encoding="utf-8") as f:
            f.write(line + "\n")


# The test machine is busy (two cores, builds and other peers): the worker must not turn
# jobs away for load, and one warm process is enough.
server = AgentServer(
    load_fnc=lambda: 0.0, num_idle_processes=1, initialize_process_timeout=60.0, port=0
)


@server.rtc_session(agent_name=AGENT_NAME)
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()
    user = await ctx.wait_for_participant()
    report(event="dispatched", room=ctx.room.name, agent_name=AGENT_NAME, outpost=user.identity)

    @ctx.room.on("track_subscribed")
    def _on_track(track, pub, participant):
        if participant.identity == user.identity and track.kind == rtc.TrackKind.KIND_AUDIO:
            report(event="mic", track=pub.sid)

    tools = await outpost_tools.discover_tools(ctx.room, user.identity)
    report(event="tools", names=[t.info.name for t in tools])
    session = AgentSession(
        llm=ScriptedLLM(),
        stt=ScriptedSTT(),
        tts=EspeakTTS(),
        vad=inference.VAD(model="silero"),
        turn_handling={"turn_detection": "vad"},
    )

    @session.on("user_input_transcribed")
    def _on_user(ev):
        report(event="user_transcript", text=ev.transcript, final=ev.is_final)

    @session.on("conversation_item_added")
    def _on_item(ev):
        item = ev.item
        if isinstance(item, llm.ChatMessage):
            report(event="said", role=item.role, text=item.text_content)

    await session.start(
        Agent(instructions="You are a test agent.", tools=tools),
        room=ctx.room,
        room_options=room_io.RoomOptions(
            audio_input=True,
            audio_output=os.environ.get("LK_AUDIO_OUT", "1") == "1",
            text_input=True,
            text_output=True,
            participant_identity=user.identity,
        ),
    )
    report(event="ready", room=ctx.room.name)


if __name__ == "__main__":
    cli.run_app(server)
