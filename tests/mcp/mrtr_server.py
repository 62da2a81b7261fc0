"""A small MCP server (stdio) on the official Python SDK (`mcp`, pinned in
tests/py/requirements.txt) for the multi-round-trip requests of MCP 2026-07-28, served
on both revisions: the client picks one with its first request.

- 2026-07-28: the client opens with `server/discover` (no initialize), every request
  carries the `_meta` envelope, and the server may not send requests of its own. A tool
  that needs the user or the client's roots answers `tools/call` with an
  `input_required` result (`inputRequests`, keyed, and/or an opaque `requestState`);
  the client retries the same call with `inputResponses` and the echoed `requestState`.
  Change notifications reach only clients holding a `subscriptions/listen` stream.
- 2025-11-25: the initialize handshake; the same tools send ordinary server-to-client
  requests (`elicitation/create`, `roots/list`) in the middle of the call, and
  `notifications/tools/list_changed` goes out on the connection.

Tools:
- `ask_name`: a form elicitation with one required string property `name`; answers
  "hello <name>", or "declined" / "cancelled".
- `my_roots`: asks the client for its roots; answers their URIs, one a line, or
  "no roots".
- `sign_in_link`: a URL-mode elicitation of `http://127.0.0.1:9/signin/<id>` (nothing
  listens there); answers "link accepted" / "link declined" / "link cancelled".
- `add_tool`: registers `extra_<n>` (n = 1, 2, ...) and announces that the tool list
  changed; answers "added extra_<n>".
- `endless(state_only=false)`: on 2026-07-28 never finishes: every round asks the form
  question again (or, with `state_only`, returns only a fresh `requestState`), so a
  client must give up after a bounded number of rounds. On 2025-11-25 it elicits once
  and answers "done".
- `state_echo`: on 2026-07-28 the first round returns only a `requestState`; the retry
  answers "state ok" if the echoed state is the one it sent, else "state mismatch". On
  2025-11-25 there is no state to echo: it answers "no request state on 2025-11-25".

`ask_name` and `my_roots` use the SDK's resolvers (`Resolve` with `Elicit` /
`ListRoots`), which pick the right mechanism for the request's revision and refuse
(-32021, naming the missing capability) a client that did not declare `elicitation`
(form) or `roots`; their `inputRequests` keys are the resolvers' names
(`__main__:name_question`, `__main__:roots_question`). The other tools branch on
`ctx.protocol_version` themselves and check no capability.

The SDK seals every outgoing `requestState` (AES-GCM, a key made at start-up) and
rejects an echo it did not mint with -32602 "Invalid or expired requestState" before
any tool runs. With `--plain-state` that sealing is off: the wire carries the tool's
own state, so a client that alters it reaches `state_echo` ("state mismatch").

Every `tools/call` request (each round) is logged to stderr, before anything else
handles it, as `CALL <tool> round=<k> version=<negotiated version>`: round 1 is a call
with neither `inputResponses` nor `requestState`, and each retry of the same tool
counts up from there (per tool name, so concurrent calls of one tool share a count).
`add_tool` also logs `ADDED extra_<n>`.
"""

import argparse
import itertools
import sys
import uuid
from typing import Annotated, Any

import anyio
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    DeclinedElicitation,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    RequestStateBoundary,
    Resolve,
)
from mcp.server.stdio import stdio_server
from mcp_types import (
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitRequestURLParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsResult,
)
from mcp_types.version import is_version_at_least
from pydantic import BaseModel

parser = argparse.ArgumentParser()
parser.add_argument("--plain-state", action="store_true",
                    help="do not seal requestState (the wire carries the tools' own state)")
args = parser.parse_args()

MRTR_VERSION = "2026-07-28"
state: dict[str, Any] = {"extra": 0, "rounds": {}, "echo": set(), "links": itertools.count(1)}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def modern(ctx: Context) -> bool:
    """Whether this request is on 2026-07-28 (answers ride `input_required` results)."""
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, MRTR_VERSION)


async def log_rounds(ctx: Any, call_next: Any) -> Any:
    """Middleware: logs each tools/call round before the SDK checks its requestState."""
    if ctx.method == "tools/call" and ctx.request_id is not None:
        params = ctx.params or {}
        name = str(params.get("name"))
        retry = params.get("inputResponses") is not None or params.get("requestState") is not None
        k = state["rounds"].get(name, 0) + 1 if retry else 1
        state["rounds"][name] = k
        log(f"CALL {name} round={k} version={ctx.protocol_version}")
    return await call_next(ctx)


server = MCPServer("mrtr-test", version="1.0.0")
# Outermost, so a round the SDK refuses (a forged requestState, say) is logged too.
server.middleware.insert(0, log_rounds)
if args.plain_state:
    server.middleware[:] = [m for m in server.middleware if not isinstance(m, RequestStateBoundary)]


class NameForm(BaseModel):
    name: str


def name_question() -> Elicit[NameForm]:
    return Elicit("What is your name?", NameForm)


def roots_question() -> ListRoots:
    return ListRoots()


@server.tool()
async def ask_name(answer: Annotated[ElicitationResult[NameForm], Resolve(name_question)]) -> str:
    """Asks the user for their name (a form) and greets them."""
    if isinstance(answer, AcceptedElicitation):
        return f"hello {answer.data.name}"
    return "declined" if isinstance(answer, DeclinedElicitation) else "cancelled"


@server.tool()
async def my_roots(roots: Annotated[ListRootsResult, Resolve(roots_question)]) -> str:
    """Asks the client for its roots and answers their URIs, one a line."""
    return "\n".join(str(root.uri) for root in roots.roots) or "no roots"


def link_answer(action: str | None) -> str:
    words = {"accept": "link accepted", "decline": "link declined", "cancel": "link cancelled"}
    return words.get(action or "", f"unexpected answer {action!r}")


@server.tool()
async def sign_in_link(ctx: Context) -> str | InputRequiredResult:
    """Asks the user to open a sign-in link (URL-mode elicitation)."""
    message = "Sign in to your test account"
    if not modern(ctx):
        eid = f"link-{next(state['links'])}"
        reply = await ctx.elicit_url(message, f"http://127.0.0.1:9/signin/{eid}", eid)
        return link_answer(reply.action)
    answer = (ctx.input_responses or {}).get("sign_in")
    if answer is None:
        eid = f"link-{next(state['links'])}"
        # 2026-07-28 dropped `elicitationId` from URL-mode params; the SDK leaves it off
        # the wire, so the id lives in the URL and in requestState.
        request = ElicitRequest(params=ElicitRequestURLParams(
            message=message, url=f"http://127.0.0.1:9/signin/{eid}", elicitation_id=eid))
        return InputRequiredResult(input_requests={"sign_in": request}, request_state=f"sign_in:{eid}")
    return link_answer(answer.action if isinstance(answer, ElicitResult) else None)


@server.tool()
async def add_tool(ctx: Context) -> str:
    """Registers a new tool `extra_<n>` and announces that the tool list changed."""
    state["extra"] += 1
    name = f"extra_{state['extra']}"

    def extra() -> str:
        return f"{name} here"

    server.add_tool(extra, name=name, description=f"Added by add_tool call {state['extra']}.")
    if modern(ctx):
        # Reaches the clients holding a subscriptions/listen stream with toolsListChanged.
        await ctx.notify_tools_changed()
    else:
        await ctx.session.send_tool_list_changed()
    log(f"ADDED {name}")
    return f"added {name}"


class Again(BaseModel):
    again: str


@server.tool()
async def endless(ctx: Context, state_only: bool = False) -> str | InputRequiredResult:
    """Never finishes on 2026-07-28 (asks again every round); on 2025-11-25 asks once."""
    if not modern(ctx):
        await ctx.elicit("Once more?", Again)
        return "done"
    previous = ctx.request_state or "endless:0"
    turn = int(previous.rsplit(":", 1)[-1]) + 1 if previous.startswith("endless:") else 1
    fresh = f"endless:{turn}"
    if state_only:
        return InputRequiredResult(request_state=fresh)
    question = ElicitRequest(params=ElicitRequestFormParams(
        message=f"Once more? (round {turn})",
        requested_schema={"type": "object", "properties": {"again": {"type": "string"}},
                          "required": ["again"]}))
    return InputRequiredResult(input_requests={"again": question}, request_state=fresh)


@server.tool()
async def state_echo(ctx: Context) -> str | InputRequiredResult:
    """Round 1 returns only a requestState; the retry checks that it came back unchanged."""
    if not modern(ctx):
        return "no request state on 2025-11-25"
    echoed = ctx.request_state
    if echoed is None and ctx.input_responses is None:
        token = f"echo-{uuid.uuid4().hex}"
        state["echo"].add(token)
        return InputRequiredResult(request_state=token)
    if echoed in state["echo"]:
        state["echo"].discard(echoed)
        return "state ok"
    return "state mismatch"


async def main() -> None:
    # `MCPServer.run_stdio_async` declares `tools.listChanged: false` on 2025-11-25; run
    # the SDK's own server under options that declare it (2026-07-28 derives it from the
    # served subscriptions/listen).
    lowlevel = server._lowlevel_server  # noqa: SLF001 - no public way to pass these options
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, options)


if __name__ == "__main__":
    anyio.run(main)
