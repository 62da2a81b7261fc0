"""A LiveKit Agents agent that uses the user's local tools through Outpost.

Run it like any LiveKit agent (it registers with your LiveKit server and is dispatched
to rooms):

    pip install -r requirements.txt
    export LIVEKIT_URL=... LIVEKIT_API_KEY=... LIVEKIT_API_SECRET=...
    python agent.py start

When a session starts it asks the participant in the room (Outpost) for its tools with
`outpost.list_tools` and offers them to the LLM; each call the model makes goes to
Outpost by RPC, where the user's policy and consent decide (outpost_tools.py).

With AGENT_NAME set the worker registers under that name and is dispatched only when asked
(Outpost's `--agent-name`, or the agent name in its connection settings); without it, it
joins every new room (automatic dispatch).

The LLM is LiveKit Inference's model named by AGENT_LLM (default
"openai/gpt-4.1-mini"); any `llm.LLM` (a plugin's, or your own) works the same.
"""

from __future__ import annotations

import os

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, cli, room_io

import outpost_tools

INSTRUCTIONS = (
    "You are a helpful assistant on the user's computer. You can use the user's local "
    "tools (files, search, calculator, ...); the user approves each sensitive call. When "
    "a tool answers with an error code such as permission_denied, say plainly that the "
    "user declined or that it failed, and do not retry the same call."
)

server = AgentServer()


@server.rtc_session(agent_name=os.environ.get("AGENT_NAME", ""))
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()
    # Outpost joins as a standard participant; its identity is whatever its token says.
    user = await ctx.wait_for_participant()
    tools = await outpost_tools.discover_tools(ctx.room, user.identity)
    session = AgentSession(llm=os.environ.get("AGENT_LLM", "openai/gpt-4.1-mini"))
    await session.start(
        Agent(instructions=INSTRUCTIONS, tools=tools),
        room=ctx.room,
        # Outpost is a text client: chat in on lk.chat, replies out on lk.transcription.
        room_options=room_io.RoomOptions(
            audio_input=False,
            audio_output=False,
            text_input=True,
            text_output=True,
            participant_identity=user.identity,
        ),
    )


if __name__ == "__main__":
    cli.run_app(server)
