"""Outpost's local tools for a LiveKit Agents agent.

Outpost (the desktop frontend in the room) serves the user's local tools over LiveKit RPC
(docs/AGENTS.md): `outpost.list_tools` lists them in pages, each tool is an RPC method of
its own name taking a JSON object of parameters, and `outpost.read_result` reads on in a
result too large for one RPC answer. Every call passes Outpost's policy and, where the
policy says so, the user's consent.

    tools = await discover_tools(room, outpost_identity)
    agent = Agent(instructions=..., tools=tools)

`discover_tools` returns one raw function tool per Outpost tool, with the tool's own JSON
schema, so the LLM sees the real parameter names; each call is forwarded to Outpost by
RPC and the model gets the result JSON back, or a short refusal text naming the error
code (`permission_denied`, `invalid_parameters`, ...) so it can tell the user.

Conversations: Outpost sends the id of the conversation it opens (at the start, for a new
one, for one the user continues from its history) as a text stream on the topic
`outpost.conversation`, and returns its stored messages from the RPC method
`outpost.conversation`.
`follow_conversation(room, outpost_identity, agent)` keeps the agent's chat context on
that conversation: a new one starts empty, one the user continues from Outpost's history
starts with what was said in it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from livekit import rtc
from livekit.agents import llm

log = logging.getLogger("outpost_tools")

LIST_TOOLS = "outpost.list_tools"
READ_RESULT = "outpost.read_result"
# The RPC method returning the conversation's messages, and the text-stream topic on which
# Outpost names a conversation it opened.
CONVERSATION = "outpost.conversation"

# A call may wait for the user's consent (Outpost's prompt stays open 60 s by default)
# plus the tool's own run time: the response timeout has to cover both (docs/AGENTS.md).
CALL_TIMEOUT_S = 70.0
# Listing the catalogue needs no consent.
LIST_TIMEOUT_S = 15.0
# Hard cap on the pages read, so a misbehaving peer cannot keep the agent listing forever.
MAX_PAGES = 100


def find_outpost(room: rtc.Room) -> str | None:
    """The identity of the first remote participant that registered Outpost's methods.

    LiveKit does not publish which RPC methods a participant has, so this picks the first
    standard (non-agent) participant; pass the identity explicitly when the room may hold
    other people.
    """
    for p in room.remote_participants.values():
        if p.kind != rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            return p.identity
    return None


async def list_tools(room: rtc.Room, outpost_identity: str) -> list[dict[str, Any]]:
    """Every tool descriptor Outpost offers, following `nextCursor` across pages."""
    tools: list[dict[str, Any]] = []
    cursor: int | None = 0
    pages = 0
    while cursor is not None and pages < MAX_PAGES:
        pages += 1
        answer = await _list_page(room, outpost_identity, cursor)
        page = json.loads(answer)
        tools.extend(t for t in page.get("tools", []) if isinstance(t, dict) and t.get("name"))
        nxt = page.get("nextCursor")
        cursor = nxt if isinstance(nxt, int) else None
    return tools


async def _list_page(room: rtc.Room, outpost_identity: str, cursor: int) -> str:
    # Outpost answers its methods from the moment it joins, so no retry is needed here.
    return await room.local_participant.perform_rpc(
        destination_identity=outpost_identity,
        method=LIST_TOOLS,
        payload=json.dumps({"cursor": cursor}),
        response_timeout=LIST_TIMEOUT_S,
    )


def describe_error(tool: str, err: rtc.RpcError) -> str:
    """A short text for the model about a failed call, with Outpost's error code."""
    code = "rpc_error"
    try:
        data = json.loads(err.data) if err.data else {}
        if isinstance(data, dict) and isinstance(data.get("code"), str):
            code = data["code"]
    except ValueError:
        pass
    return f"The tool {tool} failed with error code {code}: {err.message}"


def _tool(room: rtc.Room, outpost_identity: str, descriptor: dict[str, Any]) -> Any:
    name = descriptor["name"]
    parameters = descriptor.get("parameters") or {"type": "object", "properties": {}}
    schema = {
        "name": name,
        "description": descriptor.get("description") or name,
        "parameters": parameters,
    }

    async def call(raw_arguments: dict[str, object]) -> str:
        try:
            return await room.local_participant.perform_rpc(
                destination_identity=outpost_identity,
                method=name,
                payload=json.dumps(raw_arguments),
                response_timeout=CALL_TIMEOUT_S,
            )
        except rtc.RpcError as e:
            log.info("outpost tool %s failed: %s %s", name, e.code, e.data)
            return describe_error(name, e)

    return llm.function_tool(call, raw_schema=schema)


async def discover_tools(room: rtc.Room, outpost_identity: str) -> list[Any]:
    """Outpost's tools as raw function tools that forward each call to Outpost by RPC,
    plus `outpost_read_result` for reading on in a result Outpost had to cut."""
    descriptors = await list_tools(room, outpost_identity)
    log.info("outpost offers %d tools", len(descriptors))
    tools = [_tool(room, outpost_identity, d) for d in descriptors]
    tools.append(read_result_tool(room, outpost_identity))
    return tools


async def read_result(room: rtc.Room, outpost_identity: str, request_id: str, offset: int) -> dict[str, Any]:
    """One more part of a cut result (`{"json": ..., "nextOffset"?: ...}`)."""
    answer = await room.local_participant.perform_rpc(
        destination_identity=outpost_identity,
        method=READ_RESULT,
        payload=json.dumps({"id": request_id, "offset": offset}),
        response_timeout=LIST_TIMEOUT_S,
    )
    return json.loads(answer)


def read_result_tool(room: rtc.Room, outpost_identity: str) -> Any:
    """A function tool that lets the model read on in a result Outpost had to cut."""
    schema = {
        "name": "outpost_read_result",
        "description": (
            "Read the next part of a tool result that was cut because it was too large "
            "(the cut answer's note names the id and the offset)."
        ),
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "offset": {"type": "integer"}},
            "required": ["id", "offset"],
        },
    }

    async def call(raw_arguments: dict[str, object]) -> str:
        try:
            request_id = str(raw_arguments.get("id", ""))
            offset = int(str(raw_arguments.get("offset", 0)))
            part = await read_result(room, outpost_identity, request_id, offset)
            return json.dumps(part)
        except ValueError:
            return "outpost_read_result needs an id (text) and an offset (a whole number)"
        except rtc.RpcError as e:
            return describe_error(READ_RESULT, e)

    return llm.function_tool(call, raw_schema=schema)


async def read_conversation(room: rtc.Room, outpost_identity: str) -> dict[str, Any]:
    """The conversation Outpost shows: `{"conversationId", "messages": [{"role", "text"}],
    "omitted": N}`, the newest messages that fit one RPC answer (`omitted` older ones left
    out)."""
    answer = await room.local_participant.perform_rpc(
        destination_identity=outpost_identity,
        method=CONVERSATION,
        payload="{}",
        response_timeout=LIST_TIMEOUT_S,
    )
    return json.loads(answer)


def follow_conversation(room: rtc.Room, outpost_identity: str, agent: Any, on_loaded: Any = None) -> None:
    """Keeps `agent`'s chat context on the conversation Outpost shows: whenever Outpost
    names one on the `outpost.conversation` topic (a new conversation, or one continued
    from its history), the context is replaced by the agent's instructions plus that
    conversation's messages. `on_loaded(conversation)` is called after each load.
    Registers a text stream handler for the topic (one per room)."""

    async def load() -> None:
        try:
            conversation = await read_conversation(room, outpost_identity)
        except rtc.RpcError as e:
            log.info("could not read Outpost's conversation: %s %s", e.code, e.message)
            return
        ctx = llm.ChatContext.empty()
        for m in conversation.get("messages", []):
            role = m.get("role")
            if role in ("user", "assistant") and isinstance(m.get("text"), str):
                ctx.add_message(role=role, content=m["text"])
        await agent.update_chat_ctx(ctx)
        if on_loaded is not None:
            on_loaded(conversation)

    async def named(reader: rtc.TextStreamReader) -> None:
        await reader.read_all()
        await load()

    def opened(reader: rtc.TextStreamReader, participant_identity: str) -> None:
        if participant_identity == outpost_identity:
            tasks.add(task := asyncio.ensure_future(named(reader)))
            task.add_done_callback(tasks.discard)

    tasks: set[asyncio.Future[None]] = set()
    room.register_text_stream_handler(CONVERSATION, opened)
