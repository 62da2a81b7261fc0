"""A hostile MCP server (stdio) on the official Python SDK (`mcp`, pinned in
tests/py/requirements.txt), for the bounds of issue 30 (findings 6, 7 and 8). It plays
within MCP but sends as much as it can:

- Its tool list holds `--tools N` generated tools (`big_000`...), each with a
  `--description BYTES` description and an input schema of about `--schema BYTES`, which
  change at every `notifications/tools/list_changed` it sends, and `marker_g<n>`, named
  after the number of changes so far. Each `tools/list` it answers is logged to stderr as
  `LIST <n>`.
- `flood(count, pause_ms)`: sends `count` `notifications/tools/list_changed`, `pause_ms`
  apart, the list changing each time; answers "flooded <count>".
- `progress_flood(count, size)`: sends `count` progress notifications (message of `size`
  bytes each) as fast as it can, then answers "done after <count>".
- With `--stderr-flood MIB`, it first writes MIB MiB to stderr without a newline, then a
  newline and `STDERR-END`, then serves.
- With `--one-page-bytes BYTES`, its first tools/list answer is padded to that size on
  one line.

For the sandbox of issue 28 it also tries to get out, each attempt a tool that answers
what happened (an error is raised as the tool's error, so the client sees it):
- `read_file(path)`, `write_file(path, text)`: reads or writes a file.
- `tcp_connect(port)`, `udp_send(port)`: a TCP connection or a UDP datagram to
  127.0.0.1:`port`.
- `unix_connect(path)`: connects to a Unix-domain socket (the session bus, an agent).
- `orphan(seconds)`: starts a helper that tries to leave the server's process group
  (`setsid`, then `setpgid`) and to detach (a double fork), then sleeps `seconds`;
  answers the helper's pid and what its attempts gave.
- `run(argv)`: runs a program (a setuid one, say) and answers its output.
- `no_new_privs()`: tries to clear no_new_privs with `prctl` and answers the flag after.
- `signal(pid)`: sends signal 0 to `pid` (a process outside the server).
"""

import argparse
import ctypes
import os
import socket
import subprocess
import sys
import time

import functools

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import Tool as MCPTool

parser = argparse.ArgumentParser()
parser.add_argument("--tools", type=int, default=0)
parser.add_argument("--description", type=int, default=100)
parser.add_argument("--schema", type=int, default=100)
parser.add_argument("--stderr-flood", type=int, default=0)
parser.add_argument("--one-page-bytes", type=int, default=0)
args = parser.parse_args()

state = {"generation": 0, "lists": 0}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Hostile(MCPServer):
    async def list_tools(self) -> list[MCPTool]:
        state["lists"] += 1
        log(f"LIST {state['lists']}")
        tools = await super().list_tools()
        g = state["generation"]
        # A small tool named after the generation, for a client to wait for.
        tools.append(MCPTool(name=f"marker_g{g}", description="which change this is",
                             input_schema={"type": "object"}))
        pad = args.one_page_bytes if state["lists"] == 1 else 0
        for i in range(args.tools):
            tools.append(MCPTool(
                name=f"big_{i:03}",
                description=f"generation {g} " + "d" * args.description + ("p" * pad if i == 0 else ""),
                input_schema={
                    "type": "object",
                    "properties": {"x": {"type": "string", "description": "s" * args.schema}},
                },
            ))
        return tools


server = Hostile("hostile-test")


@server.tool()
async def flood(count: int, pause_ms: int, ctx: Context) -> str:
    """Sends `count` tools/list_changed notifications, the list changing each time."""
    for _ in range(count):
        state["generation"] += 1
        if ctx.protocol_version == "2026-07-28":
            # That revision announces changes only on the client's subscriptions/listen stream.
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        await anyio.sleep(pause_ms / 1000)
    return f"flooded {count}"


@server.tool()
async def progress_flood(count: int, size: int, ctx: Context) -> str:
    """Sends `count` progress notifications of `size` bytes each, then answers."""
    message = "m" * size
    for i in range(count):
        await ctx.report_progress(i + 1, count, message)
    return f"done after {count}"


def attempt(fn):
    """The OS's refusal (an OSError) as the tool's error, so the client sees it."""

    @functools.wraps(fn)
    def wrapper(*a, **kw):
        try:
            return fn(*a, **kw)
        except OSError as e:
            raise ToolError(f"{type(e).__name__}: {e}") from e

    return wrapper


@server.tool()
@attempt
def read_file(path: str) -> str:
    """Reads a file and answers its text."""
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


@server.tool()
@attempt
def write_file(path: str, text: str) -> str:
    """Writes `text` to a file (appending)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return f"wrote {path}"


@server.tool()
@attempt
def tcp_connect(port: int) -> str:
    """Connects to 127.0.0.1:`port` over TCP and sends a line."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"escaped over tcp\n")
    return "connected"


@server.tool()
@attempt
def udp_send(port: int) -> str:
    """Sends a datagram to 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"escaped over udp", ("127.0.0.1", port))
    return "sent"


@server.tool()
@attempt
def unix_connect(path: str) -> str:
    """Connects to a Unix-domain socket."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
    return "connected"


ORPHAN = r"""
import os, sys, time
tries = []
for name, call in (("setsid", os.setsid), ("setpgid", lambda: os.setpgid(0, 0))):
    try:
        call()
        tries.append(name + " ok")
    except OSError as e:
        tries.append(f"{name} refused: {e}")
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.write(w, (str(os.getpid()) + " " + str(os.getpgid(0)) + " " + "; ".join(tries) + "\n").encode())
    os.close(w)
    time.sleep(float(sys.argv[1]))
    os._exit(0)
os.close(w)
sys.stdout.write(os.read(r, 4096).decode())
"""


@server.tool()
def orphan(seconds: float) -> str:
    """Starts a helper that tries to leave the process group and detach, then sleeps."""
    out = subprocess.run([sys.executable, "-c", ORPHAN, str(seconds)],
                         capture_output=True, text=True, timeout=10)
    return (out.stdout + out.stderr).strip()


@server.tool()
def run(argv: list[str]) -> str:
    """Runs a program and answers its output."""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    return (out.stdout + out.stderr).strip()


@server.tool()
def no_new_privs() -> str:
    """Tries to clear no_new_privs (prctl), then answers the flag and the attempt."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_get_no_new_privs = 38, 39
    rc = libc.prctl(pr_set_no_new_privs, 0, 0, 0, 0)
    err = ctypes.get_errno()
    flag = libc.prctl(pr_get_no_new_privs, 0, 0, 0, 0)
    return f"clear: rc={rc} errno={err}; no_new_privs={flag}"


@server.tool()
@attempt
def signal(pid: int) -> str:
    """Sends signal 0 to `pid`."""
    os.kill(pid, 0)
    return "signalled"


if __name__ == "__main__":
    if args.stderr_flood:
        chunk = "e" * (1024 * 1024)
        for _ in range(args.stderr_flood):
            sys.stderr.write(chunk)
        sys.stderr.write("\nSTDERR-END\n")
        sys.stderr.flush()
    anyio.run(server.run_stdio_async)
