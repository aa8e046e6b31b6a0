"""A fork server that runs the lit tests' Python tools without a Python start-up per command.

Most of a lit test's time is Python importing abir, xDSL and NumPy for each `abir-opt`,
`abir-run`, `filecheck` or `python script.py` of its RUN lines. lit.cfg.py starts this server
once, with the modules of those tools imported, and puts shims (`tool_client.py`) first on the
tests' PATH. For each command a shim connects, passes its standard input, output and error (the
file descriptors themselves), arguments, working directory and environment; the server forks a
child that takes them over and runs the tool's entry point as its console script would, then
reports the exit status, which the shim exits with. The imported modules are all a child shares
with the server: the tool runs in a fresh copy of an interpreter in which nothing but imports
happened, with the command's own environment (modules such as JAX, imported by a tool when it
runs, read it then).

    python tool_server.py SOCKET_PATH TOOL=MODULE:FUNCTION ...

`TOOL=python` (no entry point) runs `python SCRIPT ARGS...` as the interpreter runs a script.
The server stops on SIGTERM or when its parent (lit) exits, after waiting for its children.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import runpy
import signal
import socket
import sys
import threading
import traceback
from collections.abc import Callable

from tool_client import HEADER, PYTHON  # the protocol, defined once beside its client

IDLE_CHECK_SECONDS = 1.0
"""How often the server looks whether its parent has exited while no request comes."""


def entry_points(specs: list[str]) -> dict[str, Callable[[], object] | None]:
    """Each tool's entry point, imported now (`abir-opt=abir.tools.abir_opt:main`); None for `python`."""
    tools: dict[str, Callable[[], object] | None] = {}
    for spec in specs:
        tool, _, target = spec.partition("=")
        if tool == PYTHON:
            tools[tool] = None
            continue
        module, _, function = target.partition(":")
        tools[tool] = getattr(importlib.import_module(module), function)
    return tools


def receive_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection before its request ended")
        data += chunk
    return data


def receive_request(conn: socket.socket) -> tuple[list[int], dict]:
    """The client's standard streams and its request (tool, argv, cwd, env)."""
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    if len(header) < HEADER.size:
        header += receive_exactly(conn, HEADER.size - len(header))
    (size,) = HEADER.unpack(header)
    return fds, json.loads(receive_exactly(conn, size))


def reopened(fd: int, stream: io.TextIOWrapper) -> io.TextIOWrapper:
    """A standard stream on `fd` as the interpreter opens it at start-up: the old one was opened on
    the server's file (whether it can seek, whether it is a terminal)."""
    buffer = open(fd, "rb" if fd == 0 else "wb", closefd=False)  # noqa: SIM115 (the child's stream until it exits)
    line_buffering = stream.line_buffering if fd == 2 else os.isatty(fd)
    return io.TextIOWrapper(buffer, encoding=stream.encoding, errors=stream.errors, newline="\n",
                            line_buffering=line_buffering, write_through=stream.write_through)


def take_over(fds: list[int], request: dict) -> None:
    """Makes this child look like the command the client runs: its streams, directory, environment."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = sys.__stdin__ = reopened(0, sys.__stdin__)
    sys.stdout = sys.__stdout__ = reopened(1, sys.__stdout__)
    sys.stderr = sys.__stderr__ = reopened(2, sys.__stderr__)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])


def exit_status(code: object) -> int:
    """The process exit status `sys.exit(code)` gives, printing a message code as Python does."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def run_tool(entry: Callable[[], object] | None, request: dict) -> int:
    """Runs the tool as its console script (or the interpreter, for a script) would; its exit status."""
    argv = request["argv"]
    try:
        if entry is None:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
            return 0
        sys.argv = [request["tool"], *argv]
        sys.path[0] = os.path.dirname(request["real"])
        return exit_status(entry())
    except SystemExit as error:
        return exit_status(error.code)
    except BaseException:
        traceback.print_exc()
        return 1


def flush_streams() -> int:
    """Flushes standard output and error as the interpreter does at exit; 120 where that fails."""
    status = 0
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = 120
    return status


def exit_with_client(conn: socket.socket) -> None:
    """Ends the child when its client goes away (lit killed the command at its time limit)."""
    def watch() -> None:
        try:
            conn.recv(1)
        finally:
            os._exit(1)
    threading.Thread(target=watch, daemon=True).start()


def serve_one(conn: socket.socket, tools: dict[str, Callable[[], object] | None]) -> None:
    """In the forked child: runs one request and sends back its exit status; never returns."""
    status = 1
    try:
        conn.setblocking(True)
        fds, request = receive_request(conn)
        take_over(fds, request)
        exit_with_client(conn)
        status = run_tool(tools[request["tool"]], request)
        status = flush_streams() or status
        conn.sendall(HEADER.pack(status))
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(status)


def reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_for_children() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def serve(path: str, tools: dict[str, Callable[[], object] | None]) -> None:
    """Accepts requests until SIGTERM or until the parent exits; each one runs in a forked child."""
    parent = os.getppid()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(IDLE_CHECK_SECONDS)
    sys.stdout.flush()
    sys.stderr.flush()
    while not stopping and os.getppid() == parent:
        try:
            conn, _ = listener.accept()
        except (TimeoutError, InterruptedError):
            reap_children()
            continue
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            serve_one(conn, tools)
        conn.close()
        reap_children()
    listener.close()
    wait_for_children()


def main() -> None:
    path, *specs = sys.argv[1:]
    serve(path, entry_points(specs))


if __name__ == "__main__":
    main()
