"""`abir-opt`: xdsl-opt with abir's dialects and passes registered.

    abir-opt prog.mlir -p infer-types,abir-lower
    abir-opt prog.mlir --print-op-generic | abir-opt
    abir-opt --list-abir-passes

A failing pass or malformed input is printed as a diagnostic (`abir-opt: error: ...`, exit
status 1), not as a Python traceback, at the `file:line:column` of the op it concerns when that
op was read from the input; `--verify-diagnostics` and `--parsing-diagnostics` keep
xdsl-opt's meaning (print the diagnostic, exit 0).
"""

import argparse
import sys
from collections.abc import Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.utils.lexer import Span
from xdsl.xdsl_opt_main import xDSLOptMain

from abir.dialects import get_all_dialects, verify_error_text, verify_module
from abir.dialects.parsing import AbirParser, located_error_text
from abir.errors import AbirError
from abir.passes import PASSES, get_all_passes


class AbirOptMain(xDSLOptMain):
    """The xDSL optimizer driver, restricted to the dialects abir's IR uses."""

    version_format = "abir-opt built from xdsl version {xdsl_version}"

    def register_all_dialects(self) -> None:
        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    op_spans: dict[Operation, Span]
    """Where each op of the chunk being read and transformed starts in the input, so that an
    error of the verifier or of a pass points at the op's line."""

    def register_all_frontends(self) -> None:
        self.op_spans = {}
        self._line_offset = 0

        def parse_mlir(io: IO[str]) -> ModuleOp:
            parser = AbirParser(self.ctx, io.read(), self.get_input_name(), self._line_offset)
            self.op_spans = parser.op_spans
            module = parser.parse_module(not self.args.no_implicit_module)
            if not self.args.disable_verify:
                verify_module(module)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        self._line_offset = start_offset  # the lines before this chunk (--split-input-file)
        return super().parse_chunk(chunk, file_extension, start_offset)

    def error_text(self, error: Exception) -> str:
        """A verifier's or a pass's error at the op's text when the op is known and was read from
        the input, else with the op printed (`verify_error_text`) or as it is."""
        return located_error_text(error, self.op_spans) or verify_error_text(error)

    def register_all_passes(self) -> None:
        super().register_all_passes()  # keeps canonicalize, cse, dce, ...
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("--list-abir-passes", action="store_true",
                                help="list abir's passes with one line each, and exit")  # fmt: skip
        for action in arg_parser._actions:  # noqa: SLF001 (argparse has no public lookup)
            if action.dest == "passes":
                others = ", ".join(name for name in self.available_passes if name not in PASSES)
                action.help = (
                    f"comma-separated passes. abir's: {', '.join(PASSES)} (--list-abir-passes says what each "
                    f"does); xDSL's: {others}"
                )

    def run(self) -> None:
        if self.args.list_abir_passes:
            print(list_passes())
            return
        super().run()


def list_passes() -> str:
    """One line per abir pass: its name and the first sentence of its docstring."""
    passes = get_all_passes()
    width = max(map(len, passes))
    return "\n".join(f"{name:<{width}}  {summary(factory().__doc__ or '')}" for name, factory in passes.items())


def summary(doc: str) -> str:
    """The first sentence of a docstring, on one line."""
    text = " ".join(doc.split())
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def main(args: Sequence[str] | None = None) -> None:
    tool: AbirOptMain | None = None
    try:
        tool = AbirOptMain(description="abir modular optimizer driver", args=args)
        tool.run()
    except RecursionError:
        name = tool.get_input_name() if tool is not None else "the input"
        print(f"abir-opt: error: {name}: the text nests too deeply to read or transform; flatten it", file=sys.stderr)
        sys.exit(1)
    except (DiagnosticException, AbirError) as e:
        text = tool.error_text(e) if tool is not None else verify_error_text(e)
        print(f"abir-opt: error: {text}", file=sys.stderr)
        sys.exit(1)
    except (ParseError, ArgSpecParseError) as e:
        print(f"abir-opt: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
