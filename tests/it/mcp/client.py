"""An MCP client for recon's tests, on the official Python SDK (`mcp`).

It starts `recon mcp` as its server over stdio and follows a plan given as
one JSON argument: how to connect (`mode`: "legacy" for the initialize
handshake, optionally pinned to an older `version`; "auto" to probe
`server/discover`; or "2026-07-28"), the client's name, and steps. Each
step prints one JSON line on stdout when it is done:

- {"list": true}: the tools as `tools/list` gives them;
- {"call": NAME, "args": {...}}: isError, structuredContent and the text;
- {"wait": true}: reads one line from stdin first (a barrier the test
  holds), prints {"waited": true};
- {"cancel": NAME, "args": {...}}: starts the call, prints {"started":
  true}, waits for a line on stdin, cancels it (the SDK sends
  `notifications/cancelled`), lists the tools (so the server has read the
  cancellation), prints {"cancelled": true}.
"""

import json
import sys

import anyio

import mcp.client.session as session_module
from mcp import Client, StdioServerParameters
from mcp.types import Implementation


def say(value):
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def result_of(result):
    text = "".join(getattr(block, "text", "") for block in result.content)
    return {
        "isError": bool(result.is_error),
        "structured": result.structured_content,
        "text": text,
    }


async def cancelled_call(client, step):
    async with anyio.create_task_group() as group:
        group.start_soon(client.call_tool, step["cancel"], step.get("args", {}))
        say({"started": True})
        await anyio.to_thread.run_sync(sys.stdin.readline)
        group.cancel_scope.cancel()
    # The server reads its stdin in order: once a later request is
    # answered, it has read the cancellation (tools/list does not wait for
    # the engine, which may be held).
    await client.list_tools(cache_mode="bypass")
    say({"cancelled": True})


async def main():
    plan = json.loads(sys.argv[1])
    if plan.get("version"):
        # The handshake offers this module's newest version; an older
        # client is this one pinned to an older offer.
        session_module.LATEST_HANDSHAKE_VERSION = plan["version"]
    server = StdioServerParameters(
        command=plan["command"][0], args=plan["command"][1:], env=plan.get("env")
    )
    client = Client(
        server,
        mode=plan.get("mode", "legacy"),
        client_info=Implementation(name=plan.get("client", "recon-tests"), version="1.0"),
    )
    async with client:
        say({"protocol": client.protocol_version})
        for step in plan["steps"]:
            if "list" in step:
                tools = await client.list_tools()
                say({"tools": [t.model_dump(by_alias=True, exclude_none=True) for t in tools.tools]})
            elif "call" in step:
                say(result_of(await client.call_tool(step["call"], step.get("args", {}))))
            elif "wait" in step:
                await anyio.to_thread.run_sync(sys.stdin.readline)
                say({"waited": True})
            elif "cancel" in step:
                await cancelled_call(client, step)


anyio.run(main)
