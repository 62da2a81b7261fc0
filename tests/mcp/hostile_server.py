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
"""

import argparse
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
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


if __name__ == "__main__":
    if args.stderr_flood:
        chunk = "e" * (1024 * 1024)
        for _ in range(args.stderr_flood):
            sys.stderr.write(chunk)
        sys.stderr.write("\nSTDERR-END\n")
        sys.stderr.flush()
    anyio.run(server.run_stdio_async)
