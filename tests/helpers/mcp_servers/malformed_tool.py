"""An MCP server over stdio, written by hand because the SDK's servers cannot send what it
sends: its tool list holds one tool whose ``inputSchema`` is not a JSON object.

It answers ``initialize`` (echoing the client's protocol version), ``tools/list`` with the
good tool ``add`` and the malformed tool ``broken``, and ``tools/call`` of ``add``.
"""

import json
import sys
from typing import Any

TOOLS = [
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
    {"name": "broken", "description": "Its schema is a string.", "inputSchema": "oops"},
]


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method, params = request["method"], request.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "malformed", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        arguments = params.get("arguments") or {}
        text = str(arguments.get("a", 0) + arguments.get("b", 0))
        return {"content": [{"type": "text", "text": text}], "isError": False}
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request and "method" in request:
        reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
