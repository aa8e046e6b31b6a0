"""The shim lit.cfg.py puts on the tests' PATH for each tool the fork server runs (tool_server.py).

Run by the interpreter with `-S -E` (no site, no environment options: only the standard library,
a few milliseconds), it hands the command to the server and exits with the tool's exit status. It
runs the real tool itself where the server cannot: no server (ABIR_LIT_TOOL_SERVER unset or not
answering), or `python` with options (`python -c ...`) rather than a script.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys

HEADER = struct.Struct("!I")
"""The length of the request that follows a message carrying the three file descriptors, and the
exit status the server sends back (tool_server.py reads and writes it)."""

SERVER_VARIABLE = "ABIR_LIT_TOOL_SERVER"
"""The environment variable holding the server's socket path (set by launch.py)."""

PYTHON = "python"
"""The tool name that runs a script, as `python SCRIPT ARGS...` does."""


def run_real_tool(real: str) -> None:
    os.execv(real, [real, *sys.argv[1:]])


def served(tool: str) -> bool:
    """Whether the server can run this command: `python` only with a script as its first argument."""
    return tool != PYTHON or (len(sys.argv) > 1 and not sys.argv[1].startswith("-"))


def run_on_server(path: str, tool: str, real: str) -> int:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(path)
    request = json.dumps({"tool": tool, "real": real, "argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(client, [HEADER.pack(len(request))], [0, 1, 2])
    client.sendall(request)
    reply = b""
    while len(reply) < HEADER.size:
        chunk = client.recv(HEADER.size - len(reply))
        if not chunk:
            print(f"{tool}: the lit tool server's child exited without a status", file=sys.stderr)
            return 70
        reply += chunk
    return HEADER.unpack(reply)[0]


def main(tool: str, real: str) -> None:
    path = os.environ.get(SERVER_VARIABLE)
    if path is None or not served(tool):
        run_real_tool(real)
    try:
        status = run_on_server(path, tool, real)
    except (ConnectionRefusedError, FileNotFoundError):
        run_real_tool(real)
    sys.exit(status)
