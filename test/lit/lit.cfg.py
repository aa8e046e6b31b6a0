# lit configuration for abir's FileCheck tests. Run with: .venv/bin/lit -v test/lit
import os
import sys

import lit.formats

config.name = "abir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".py"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "tool_server"]
config.maxIndividualTestTime = 120

# lit runs under the virtual environment's python: put that environment's bin (abir-opt,
# filecheck, python) first on PATH so the tests work without activating it.
bin_dir = os.path.dirname(sys.executable)
config.environment["PATH"] = bin_dir + os.pathsep + config.environment.get("PATH", "")
for name in ("HOME", "TMPDIR", "PYTHONPATH"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
config.environment["JAX_PLATFORMS"] = "cpu"
config.environment["TF_CPP_MIN_LOG_LEVEL"] = "3"

# abir-opt, abir-run, filecheck and `python script.py` run in children forked from one server that
# imported them (tool_server/tool_server.py): most of a command's time was Python importing them.
# `lit --param tool_server=0` runs each as its own process.
if lit_config.params.get("tool_server", "1") != "0":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tool_server"))
    import atexit

    import launch

    atexit.register(launch.start(config.environment, bin_dir).stop)

# `lit --param full=1` (make test-full) also runs the tests that REQUIRE full: the run tests' programs
# on the compiled backends, whose text route `make test` checks in pytest (test_abir_run.py).
if lit_config.params.get("full"):
    config.available_features.add("full")

config.substitutions.append(
    (
        "ABIR_ROUNDTRIP",
        "abir-opt %s --print-op-generic --split-input-file | abir-opt --split-input-file | filecheck %s",
    )
)
config.substitutions.append(
    (
        "ABIR_GENERIC_ROUNDTRIP",
        "abir-opt %s --print-op-generic --split-input-file | filecheck %s --check-prefix=CHECK-GENERIC",
    )
)
