"""A real LiveKit Agents agent (PyPI `livekit-agents`, run with the .venv-agents python)
for Outpost's end-to-end tests, with a scripted LLM instead of a model (no network).

It joins the room itself (no worker), finds Outpost's tools with the example's
`outpost_tools` module (examples/livekit-agents/: the same discovery and forwarding code
an agent developer uses), and runs an AgentSession in text mode. The scripted LLM is a
subclass of the framework's own `llm.LLM`:

- "hello"            → a reply streamed in several chunks
- "tools"            → the names of the tools it discovered
- "read PATH"        → a call to read_local_file {"filePath": PATH}, then a reply quoting
                       the content (or the error code); a cut result is read on to the
                       end with outpost_read_result first
- "calculate EXPR"   → a call to calculator {"expression": EXPR}, then the answer
- "recall ..."       → quotes the first user message of its chat context (which
                       `outpost_tools.follow_conversation` keeps on the conversation
                       Outpost shows)
- "describe ..."     → the size and SHA-256 of each image in its chat context, decoded
                       from the ImageContent's data URL (what a vision model would see)

Images the user gives Outpost arrive the way LiveKit documents for vision agents: a byte
stream on the topic "images", read whole and added to the chat context as an
`ImageContent` (a base64 data URL). Other files arrive on "files" and are only reported.

Environment: LK_URL, LK_TOKEN, OUTPOST_IDENTITY (who Outpost is), LK_TIMEOUT (seconds).
With `--stranger` it instead joins as a plain participant (LK_TOKEN is its token), calls
Outpost's calculator by RPC and prints what Outpost answered.

Prints JSON lines on stdout: {"event": "ready"}, {"event": "tools", "names": [...]},
{"event": "context", "conversation": ID, "messages": N} (a conversation loaded from
Outpost), {"event": "image" | "file", "name", "mime", "size", "sha256", "attributes"}
(a byte stream received), {"event": "stranger", ...}.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "livekit-agents"))

from livekit import rtc  # noqa: E402
from livekit.agents import Agent, AgentSession, llm, room_io  # noqa: E402
from livekit.agents.llm import ImageContent  # noqa: E402
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS  # noqa: E402

import outpost_tools  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lk_voice_agent import EspeakTTS  # noqa: E402
from lkcommon import report, stay, wait_remote  # noqa: E402

URL = os.environ.get("LK_URL", "")
TOKEN = os.environ.get("LK_TOKEN", "")
OUTPOST = os.environ.get("OUTPOST_IDENTITY", "app")
TIMEOUT = float(os.environ.get("LK_TIMEOUT", "150"))

HELLO_CHUNKS = ["Hello", " from", " the", " scripted", " agent", "."]


class ScriptedStream(llm.LLMStream):
    async def _run(self) -> None:
        for piece in self._llm.answer(self._chat_ctx, self._tools):
            if isinstance(piece, llm.FunctionToolCall):
                delta = llm.ChoiceDelta(role="assistant", tool_calls=[piece])
            else:
                delta = llm.ChoiceDelta(role="assistant", content=piece)
                # Separate chunks on the wire, as a real model's tokens would be.
                await asyncio.sleep(0.05)
            self._event_ch.send_nowait(llm.ChatChunk(id="scripted", delta=delta))


class ScriptedLLM(llm.LLM):
    def __init__(self) -> None:
        super().__init__()
        self._calls = 0
        # Parts of cut results read so far: request id → JSON text.
        self._parts: dict[str, str] = {}

    def chat(self, *, chat_ctx, tools=None, conn_options=DEFAULT_API_CONNECT_OPTIONS, **_kw):
        return ScriptedStream(self, chat_ctx=chat_ctx, tools=tools or [], conn_options=conn_options)

    def _call(self, name: str, args: dict) -> llm.FunctionToolCall:
        self._calls += 1
        return llm.FunctionToolCall(name=name, arguments=json.dumps(args), call_id=f"call_{self._calls}")

    def answer(self, chat_ctx: llm.ChatContext, tools: list) -> list:
        last = chat_ctx.items[-1] if chat_ctx.items else None
        if isinstance(last, llm.FunctionCallOutput):
            return self._after_tool(last)
        text = (last.text_content or "").strip() if isinstance(last, llm.ChatMessage) else ""
        if text == "hello":
            return list(HELLO_CHUNKS)
        if text == "tools":
            names = sorted(t.info.name for t in tools if hasattr(t, "info"))
            return ["My tools: " + ", ".join(names)]
        if text.startswith("read "):
            return [self._call("read_local_file", {"filePath": text[5:].strip()})]
        if text.startswith("mcp echo "):
            # A tool of one of the user's MCP servers, listed by outpost.list_tools.
            return [self._call("mcp__everything__echo", {"message": text[9:].strip()})]
        if text.startswith("calculate "):
            return [self._call("calculator", {"expression": text[10:].strip()})]
        if text.startswith("describe"):
            seen = []
            for item in chat_ctx.items:
                if not isinstance(item, llm.ChatMessage):
                    continue
                for c in item.content:
                    if isinstance(c, ImageContent) and isinstance(c.image, str) and c.image.startswith("data:"):
                        raw = base64.b64decode(c.image.split(",", 1)[1])
                        seen.append(f"{len(raw)} bytes, sha256 {hashlib.sha256(raw).hexdigest()}")
            if not seen:
                return ["I see no image."]
            return ["I see " + "; ".join(f"an image of {s}" for s in seen) + "."]
        if text.startswith("recall"):
            earlier = [
                i.text_content or ""
                for i in chat_ctx.items[:-1]
                if isinstance(i, llm.ChatMessage) and i.role == "user"
            ]
            if not earlier:
                return ["This conversation has nothing earlier to recall."]
            return [f"The first thing you said in this conversation was: “{earlier[0]}”"]
        return [f"You said: {text}"]

    def _after_tool(self, out: llm.FunctionCallOutput) -> list:
        m = re.match(r"The tool (\S+) failed with error code (\S+):", out.output)
        if m:
            return [f"I could not use {m.group(1)}: error code {m.group(2)}."]
        try:
            result = json.loads(out.output)
        except ValueError:
            return [f"The tool said: {out.output}"]
        if out.name == "outpost_read_result":
            rid = result.get("id", "")
            self._parts[rid] = self._parts.get(rid, "") + result.get("json", "")
            if "nextOffset" in result:
                return [self._call("outpost_read_result", {"id": rid, "offset": result["nextOffset"]})]
            whole = json.loads(self._parts.pop(rid))
            return [self._file_reply(whole, note=f"it was cut, I read on with outpost.read_result ({result.get('total')} bytes)")]
        if result.get("truncated") is True and "nextOffset" in result:
            m = re.search(r'"id":\s*"([^"]+)"', result.get("note", ""))
            rid = m.group(1) if m else ""
            self._parts[rid] = result.get("json", "")
            return [self._call("outpost_read_result", {"id": rid, "offset": result["nextOffset"]})]
        if out.name == "calculator":
            return [f"The answer is {result.get('answer')}."]
        if out.name == "read_local_file":
            return [self._file_reply(result, note="")]
        return [f"{out.name} returned {out.output}"]

    @staticmethod
    def _file_reply(result: dict, note: str) -> str:
        content = result.get("content", "")
        lines = content.splitlines()
        if len(content) > 200:
            return f"The file has {len(content)} characters ({note}); its last line is: {lines[-1] if lines else ''}"
        return f"The file says: {content.strip()}"


async def run_agent() -> None:
    room = rtc.Room()
    await room.connect(URL, TOKEN, rtc.RoomOptions(auto_subscribe=False))
    await wait_remote(room, OUTPOST, 60)
    tools = await outpost_tools.discover_tools(room, OUTPOST)
    report(event="tools", names=[t.info.name for t in tools])
    # With LK_AUDIO_OUT=1 a voice agent's replies, as most LiveKit agents have: its text
    # goes out paced by its audio, which it holds until its frontend subscribes to its voice
    # (Outpost does, with voice off too, and drops the audio).
    voice_out = os.environ.get("LK_AUDIO_OUT") == "1"
    session = AgentSession(llm=ScriptedLLM(), tts=EspeakTTS() if voice_out else None)
    agent = Agent(instructions="You are a test agent.", tools=tools)
    await session.start(
        agent,
        room=room,
        room_options=room_io.RoomOptions(
            audio_input=False,
            audio_output=voice_out,
            text_input=True,
            text_output=True,
            participant_identity=OUTPOST,
        ),
    )
    # Outpost names the conversation it shows in an attribute: keep the chat context on it.
    outpost_tools.follow_conversation(
        room,
        OUTPOST,
        agent,
        on_loaded=lambda c: report(
            event="context", conversation=c.get("conversationId"), messages=len(c.get("messages", []))
        ),
    )
    # LiveKit's documented way to give a vision agent an image: a byte stream on "images",
    # added to the chat context.
    tasks: set[asyncio.Task] = set()

    async def receive(reader: rtc.ByteStreamReader, kind: str) -> None:
        data = b""
        async for chunk in reader:
            data += chunk
        info = reader.info
        report(event=kind, name=info.name, mime=info.mime_type, size=len(data),
               sha256=hashlib.sha256(data).hexdigest(), attributes=info.attributes or {})
        if kind == "image":
            ctx = agent.chat_ctx.copy()
            url = f"data:{info.mime_type};base64,{base64.b64encode(data).decode()}"
            ctx.add_message(role="user", content=[ImageContent(image=url)])
            await agent.update_chat_ctx(ctx)

    def handler(kind: str):
        def on_stream(reader: rtc.ByteStreamReader, participant_identity: str) -> None:
            task = asyncio.create_task(receive(reader, kind))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        return on_stream

    room.register_byte_stream_handler("images", handler("image"))
    room.register_byte_stream_handler("files", handler("file"))
    report(event="ready")
    await stay(room, TIMEOUT)
    await session.aclose()
    await room.disconnect()


async def run_stranger() -> None:
    room = rtc.Room()
    await room.connect(URL, TOKEN, rtc.RoomOptions(auto_subscribe=False))
    await wait_remote(room, OUTPOST, 60)
    try:
        answer = await room.local_participant.perform_rpc(
            destination_identity=OUTPOST,
            method="calculator",
            payload=json.dumps({"expression": "1+1"}),
            response_timeout=30,
        )
        report(event="stranger", ok=True, answer=answer)
    except rtc.RpcError as e:
        report(event="stranger", ok=False, code=e.code, message=e.message, data=e.data)
    await room.disconnect()


if __name__ == "__main__":
    asyncio.run(run_stranger() if "--stranger" in sys.argv else run_agent())
