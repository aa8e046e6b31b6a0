"""Starts the lit tests' tool server (tool_server.py) for lit.cfg.py, and writes the shims that hand
commands to it."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping

from tool_client import PYTHON, SERVER_VARIABLE  # this directory is on sys.path (lit.cfg.py)

HERE = os.path.dirname(os.path.abspath(__file__))

TOOLS = {
    "abir-opt": "abir.tools.abir_opt:main",
    "abir-run": "abir.tools.abir_run:main",
    "filecheck": "filecheck.main:main",
    PYTHON: "",
}
"""The commands of the RUN lines the server runs, and each one's console-script entry point."""

START_SECONDS = 120.0
"""How long lit waits for the server to import the tools (seconds on a loaded machine)."""

SHIM = """#!{python} -SE
import sys
sys.path.insert(0, {here!r})
import tool_client
tool_client.main({tool!r}, {real!r})
"""


def write_shims(directory: str, bin_dir: str) -> None:
    """An executable per tool that hands its command to the server (tool_client.py)."""
    for tool in TOOLS:
        real = shutil.which(tool, path=bin_dir)
        if real is None:
            raise FileNotFoundError(f"lit's tool server: no {tool} in {bin_dir}; run `make install`")
        shim = os.path.join(directory, tool)
        with open(shim, "w") as file:
            file.write(SHIM.format(python=sys.executable, here=HERE, tool=tool, real=real))
        os.chmod(shim, 0o755)


def wait_until_listening(server: subprocess.Popen, socket_path: str) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not os.path.exists(socket_path):
        if server.poll() is not None:
            raise RuntimeError(f"lit's tool server exited with status {server.returncode} while starting")
        if time.monotonic() > deadline:
            raise TimeoutError(f"lit's tool server did not listen within {START_SECONDS:.0f} s")
        time.sleep(0.05)


@dataclasses.dataclass
class Server:
    """A running tool server and the directory of its socket and shims."""

    process: subprocess.Popen
    directory: str

    def stop(self) -> None:
        """Stops the server after its running children, so that their CPU time counts as its parent's."""
        self.process.terminate()
        self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


def start(environment: MutableMapping[str, str], bin_dir: str) -> Server:
    """Starts the server with the tests' environment and puts its shims first on their PATH."""
    directory = tempfile.mkdtemp(prefix="abir-lit-tools-")
    write_shims(directory, bin_dir)
    socket_path = os.path.join(directory, "socket")
    specs = [f"{tool}={target}" for tool, target in TOOLS.items()]
    process = subprocess.Popen([sys.executable, os.path.join(HERE, "tool_server.py"), socket_path, *specs],
                               env=dict(environment), stdin=subprocess.DEVNULL)
    server = Server(process, directory)
    try:
        wait_until_listening(process, socket_path)
    except BaseException:
        server.stop()
        raise
    environment["PATH"] = directory + os.pathsep + environment["PATH"]
    environment[SERVER_VARIABLE] = socket_path
    return server
