"""A tiny MCP server (stdio) on the official Python SDK (`mcp`, pinned in
tests/py/requirements.txt) for the `-32042` "URL elicitation required" error of MCP
2025-11-25, which no reference server emits.

Tools:
- `read_account`: answers "account data for <who>" once the user has "signed in";
  before that it fails with `UrlElicitationRequiredError` naming one URL-mode
  elicitation whose link is this server's own sign-in page.
- `always_needs_link`: fails with -32042 every time (the client must not retry forever).

The sign-in page is a small HTTP server on 127.0.0.1 (an ephemeral port, printed to
stderr): a GET of `/signin/<elicitationId>` marks the user signed in and sends the
client `notifications/elicitation/complete` for that id, as a real OAuth callback would.
Every tools/call attempt is logged to stderr as `CALL <tool>` so a test can count them.
"""

import asyncio
import sys
import uuid

import anyio
from mcp import UrlElicitationRequiredError
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ElicitRequestURLParams

server = MCPServer("url-elicitation-test")
state = {"signed_in": False, "session": None, "pending": set(), "port": 0}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def page(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        request = (await reader.readline()).decode("latin-1")
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        parts = request.split()
        path = parts[1] if len(parts) > 1 else ""
        eid = path.removeprefix("/signin/")
        if path.startswith("/signin/") and eid in state["pending"]:
            state["pending"].discard(eid)
            state["signed_in"] = True
            log(f"SIGNED_IN {eid}")
            if state["session"] is not None:
                await state["session"].send_elicit_complete(eid)
            body, status = b"signed in\n", b"200 OK"
        else:
            body, status = b"unknown sign-in\n", b"404 Not Found"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode()
                     + b"\r\nConnection: close\r\n\r\n" + body)
        await writer.drain()
    finally:
        writer.close()


def needs_link(ctx: Context, why: str) -> UrlElicitationRequiredError:
    state["session"] = ctx.session
    eid = str(uuid.uuid4())
    state["pending"].add(eid)
    return UrlElicitationRequiredError([
        ElicitRequestURLParams(
            message=why,
            url=f"http://127.0.0.1:{state['port']}/signin/{eid}",
            elicitation_id=eid,
        )
    ])


@server.tool()
async def read_account(who: str, ctx: Context) -> str:
    """Reads the signed-in user's account (sign in first, through a link)."""
    log("CALL read_account")
    if not state["signed_in"]:
        raise needs_link(ctx, "Sign in to your test account")
    return f"account data for {who}"


@server.tool()
async def always_needs_link(ctx: Context) -> str:
    """Always asks for a link, even after it was opened."""
    log("CALL always_needs_link")
    raise needs_link(ctx, "Open this again")


async def main() -> None:
    listener = await asyncio.start_server(page, "127.0.0.1", 0)
    state["port"] = listener.sockets[0].getsockname()[1]
    log(f"SIGNIN_PORT {state['port']}")
    async with listener:
        await server.run_stdio_async()


if __name__ == "__main__":
    anyio.run(main, backend="asyncio")
