"""A real MCP client (the official Python SDK, pinned in requirements.txt) against skald.

Usage: client.py stdio SKALD_BINARY
       client.py http URL KEY

Lists the tools, writes a memory with commit_memory, finds it with search_memories, searches the
documents added before with search_docs, lists and
reads it, fetches the ref named in $SKALD_TEST_REF (and, over HTTP, with a second key's tenant
in $SKALD_TEST_FOREIGN_KEY), calls tools with bad arguments, forgets the memory; prints one JSON
report on stdout for the Rust test to check.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result):
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


async def exercise(session, report):
    await session.initialize()
    tools = await session.list_tools()
    report["tools"] = [tool.name for tool in tools.tools]
    report["schemas_are_objects"] = all(tool.input_schema.get("type") == "object" for tool in tools.tools)

    written = await session.call_tool(
        "commit_memory",
        {"memory_content": "The user deploys with blue-green releases", "memory_type": "preference", "category": "deploys"},
    )
    report["commit"] = {"is_error": written.is_error, "text": text_of(written)}
    found = await session.call_tool("search_memories", {"query": "blue-green releases"})
    report["search"] = {"is_error": found.is_error, "text": text_of(found)}
    listed = await session.call_tool("memory_ls", {"path": "viking://"})
    report["ls"] = {"is_error": listed.is_error, "text": text_of(listed)}
    uri = None
    for line in text_of(found).replace('"', " ").split():
        if line.startswith("viking://") and line.endswith(".md"):
            uri = line
            break
    report["uri"] = uri
    if uri:
        read = await session.call_tool("memory_read", {"uri": uri, "level": "l2"})
        report["read"] = {"is_error": read.is_error, "text": text_of(read)}

    docs = await session.call_tool("search_docs", {"query": "rotate signing keys"})
    report["search_docs"] = {"is_error": docs.is_error, "text": text_of(docs)}

    ref = os.environ.get("SKALD_TEST_REF")
    if ref:
        fetched = await session.call_tool("fetch_original_data", {"ref_ids": [ref], "lines": "1:3"})
        report["fetch"] = {"is_error": fetched.is_error, "text": text_of(fetched)}

    errors = {}
    for name, arguments in [
        ("search_memories", {"qeury": "typo"}),
        ("search_docs", {"query": "keys", "path": "viking://user"}),
        ("fetch_original_data", {}),
        ("memory_read", {"uri": 42}),
        ("no_such_tool", {}),
    ]:
        try:
            result = await session.call_tool(name, arguments)
            errors[name] = {"raised": False, "is_error": result.is_error, "text": text_of(result)}
        except MCPError as error:
            errors[name] = {"raised": True, "code": error.error.code, "message": error.error.message}
    report["bad_arguments"] = errors

    if uri:
        forgotten = await session.call_tool("memory_forget", {"uri": uri})
        report["forget"] = {"is_error": forgotten.is_error, "text": text_of(forgotten)}


async def over_stdio(binary):
    report = {"transport": "stdio"}
    params = StdioServerParameters(command=binary, args=["mcp"], env=dict(os.environ))
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await exercise(session, report)
    return report


async def over_http(url, key):
    report = {"transport": "http"}
    async with create_mcp_http_client(headers={"x-skald-key": key}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await exercise(session, report)
    foreign = os.environ.get("SKALD_TEST_FOREIGN_KEY")
    ref = os.environ.get("SKALD_TEST_REF")
    if foreign and ref:
        async with create_mcp_http_client(headers={"x-skald-key": foreign}) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    fetched = await session.call_tool("fetch_original_data", {"ref_ids": [ref]})
                    report["foreign_fetch"] = {"is_error": fetched.is_error, "text": text_of(fetched)}
    step = "connect"
    try:
        async with create_mcp_http_client(headers={"x-skald-key": "sk-skald-not-a-key"}) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    step = "initialize"
                    await session.initialize()
                    step = "list_tools"
                    await session.list_tools()
        report["bad_key"] = {"refused": False}
    except BaseException as error:  # noqa: BLE001 — any refusal counts, its text is reported
        report["bad_key"] = {"refused": True, "at": step, "error": repr(error)[:500]}
    return report


def main():
    mode = sys.argv[1]
    if mode == "stdio":
        report = asyncio.run(over_stdio(sys.argv[2]))
    else:
        report = asyncio.run(over_http(sys.argv[2], sys.argv[3]))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
