"""`abir-opt`: xdsl-opt with abir's dialects and passes registered.

    abir-opt prog.mlir -p infer-types,abir-lower
    abir-opt prog.mlir --print-op-generic | abir-opt
    abir-opt --list-abir-passes

A failing pass or malformed input is printed as a diagnostic (`abir-opt: error: ...`, exit
status 1), not as a Python traceback, at the `file:line:column` of the op it concerns when that
op was read from the input; `--verify-diagnostics` and `--parsing-diagnostics` keep
xdsl-opt's meaning (print the diagnostic, exit 0). So is a command line abir-opt cannot act on:
an unknown pass (with the closest names), an option a pass does not take or a value of the
wrong kind, malformed `-p` syntax, an input file that cannot be read.
"""

import argparse
import dataclasses
import difflib
import functools
import os
import sys
import textwrap
from collections.abc import Iterable, Sequence
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass, get_pass_option_infos
from xdsl.utils.arg_spec import ArgSpec, parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.utils.lexer import Span
from xdsl.xdsl_opt_main import xDSLOptMain

from abir.dialects import get_all_dialects, verify_error_text, verify_module
from abir.dialects.parsing import AbirParser, located_error_text
from abir.errors import AbirError
from abir.passes import PASSES, get_all_passes

OPTION_SYNTAX = (
    "Pass options: -p 'infer-types{entry=f arg-types=i64,f64}': a pass's options in braces, separated by "
    "spaces; the values of a list option (arg-types: one type per parameter) separated by commas, a value "
    'with punctuation in double quotes (arg-types=i64,"tensor<3xf64>").'
)
"""How `-p` takes pass options, as xDSL's pipeline parser reads them."""


class CommandLineError(Exception):
    """A command line abir-opt cannot act on (an unknown pass or pass option, an unreadable input
    or output file); the message names it and a fix."""


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

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            parser = AbirParser(self.ctx, self.read_text(io), self.get_input_name(), self._line_offset)
            self.op_spans = parser.op_spans
            module = parser.parse_module(not self.args.no_implicit_module)
            if not self.args.disable_verify:
                verify_module(module)
            return module

        self.available_frontends["mlir"] = parse_mlir

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        try:
            return super().get_input_stream()
        except OSError as e:
            raise CommandLineError(f"cannot read the input file {self.args.input_file}: {e.strerror}") from None

    def prepare_input(self) -> tuple[list[tuple[IO[bytes], int]], str]:
        try:
            return super().prepare_input()
        except ValueError as e:  # xDSL's only ValueError here: no frontend for the file's extension
            raise CommandLineError(
                f"{self.get_input_name()}: {e}; abir-opt reads MLIR text: name the file *.mlir or pass -f mlir"
            ) from None

    def prepare_output(self) -> IO[str]:
        try:
            return super().prepare_output()
        except OSError as e:
            raise CommandLineError(f"cannot write the output file {self.args.output_file}: {e.strerror}") from None

    def read_text(self, io: IO[bytes]) -> str:
        """The input's text; a `CommandLineError` naming the input when it is not UTF-8."""
        data = io.read()
        try:
            return data.decode("utf-8") if isinstance(data, bytes) else data
        except UnicodeDecodeError as e:
            raise CommandLineError(f"{self.get_input_name()} is not UTF-8 text: {e}") from None

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

    def setup_pipeline(self) -> None:
        """xdsl-opt's pipeline, once every pass of `-p` is known to exist and to take the options
        it is given (a `CommandLineError` naming the pass, the option and a fix otherwise)."""
        for spec in parse_pipeline(self.args.passes):
            self.check_pass_spec(spec)
        super().setup_pipeline()

    def check_pass_spec(self, spec: ArgSpec) -> None:
        """Raise a `CommandLineError` unless `spec` names a registered pass with its options."""
        factory = self.available_passes.get(spec.name)
        if factory is None:
            raise CommandLineError(unknown_pass_text(spec.name, self.available_passes))
        pass_class = factory()
        options = option_names(pass_class)
        for given in spec.parameters:
            if given.replace("_", "-") not in options:
                raise CommandLineError(unknown_option_text(spec.name, given, options))
        try:
            pass_class.from_pass_spec(spec)
        except ValueError as e:  # a value of the wrong kind, a missing required option
            raise CommandLineError(f"-p '{spec}': {e}; {options_text(pass_class)}. {OPTION_SYNTAX}") from None

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument("--list-abir-passes", action="store_true",
                                help="list abir's passes with one line each, and exit")  # fmt: skip
        xdsl_passes = [name for name in self.available_passes if name not in PASSES]
        arg_parser.formatter_class = functools.partial(HelpFormatter, description=arg_parser.description or "")
        arg_parser.epilog = wrapped("xDSL's passes, which -p takes too:", xdsl_passes)
        for action in arg_parser._actions:  # noqa: SLF001 (argparse has no public lookup)
            if action.dest == "passes":
                action.help = "comma-separated passes with their options: abir's are listed above, xDSL's below"

    def run(self) -> None:
        if self.args.list_abir_passes:
            print(list_passes())
            return
        super().run()


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """`--help`'s layout, its description widened by `help_text` only when the help is printed: the
    default pipeline comes from the pipeline's module, which imports most passes, a cost that every
    other run of abir-opt (a round trip, a single pass) is spared."""

    def __init__(self, prog: str, description: str) -> None:
        super().__init__(prog)
        self.description = description

    def add_text(self, text: str | None) -> None:
        super().add_text(help_text(text, PASSES) if text is not None and text == self.description else text)


def help_text(description: str, abir_passes: Iterable[str]) -> str:
    """The top of `--help`: the tool, abir's passes and how to give pass options."""
    # The pipeline's module imports most passes: only the help needs it (HelpFormatter).
    from abir.passes.pipeline import DEFAULT_PIPELINE

    heading = "abir's passes (abir-opt --list-abir-passes says what each does):"
    spec = wrapped("", DEFAULT_PIPELINE.split(",")).replace(", ", ",")  # as -p takes it, broken after commas
    pipeline = f"The default pipeline, which abir-lower runs:{spec}"
    return "\n\n".join([description, wrapped(heading, abir_passes), pipeline, textwrap.fill(OPTION_SYNTAX, 78)])


def wrapped(heading: str, names: Iterable[str]) -> str:
    """`heading`, then the comma-separated `names` on indented lines (no name split)."""
    body = textwrap.fill(", ".join(names), 76, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
    return f"{heading}\n{body}"


def unknown_pass_text(name: str, available: Iterable[str]) -> str:
    """An unknown pass's error: the closest abir pass names (else xDSL's) and how to list them."""
    close = difflib.get_close_matches(name, PASSES, n=3) or difflib.get_close_matches(name, available, n=3)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    return f"unknown pass '{name}'; {hint}abir-opt --list-abir-passes lists abir's passes (abir-opt --help xDSL's too)"


def option_names(pass_class: type[ModulePass]) -> list[str]:
    """The options a pass takes, as `-p` writes them (kebab-case)."""
    return [field.name.replace("_", "-") for field in dataclasses.fields(pass_class) if field.init]


QUOTE = "'"
"""xDSL quotes the option types it reads from annotations written as strings."""


def options_text(pass_class: type[ModulePass]) -> str:
    """`NAME takes OPTION (TYPE), ...` or that it takes none."""
    infos = [
        f"{info.name.replace('_', '-')} ({info.expected_type.strip(QUOTE)})" for info in get_pass_option_infos(pass_class)
    ]
    return f"{pass_class.name} takes {', '.join(infos)}" if infos else f"{pass_class.name} takes no options"


def unknown_option_text(pass_name: str, given: str, options: Sequence[str]) -> str:
    """An option a pass does not take: the closest of its options, or all of them."""
    close = difflib.get_close_matches(given, options, n=1)
    if not options:
        return f"pass {pass_name} takes no options, got '{given}'; write -p {pass_name}"
    hint = f"did you mean {close[0]}? " if close else ""
    return f"pass {pass_name} has no option '{given}'; {hint}its options: {', '.join(options)}. {OPTION_SYNTAX}"


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
    except BrokenPipeError:  # the reader of the output stopped early (`abir-opt ... | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush into
        sys.exit(1)
    except ArgSpecParseError as e:
        print(f"abir-opt: error: {str(e).rstrip()}\n{OPTION_SYNTAX}", file=sys.stderr)
        sys.exit(1)
    except (ParseError, CommandLineError) as e:
        print(f"abir-opt: error: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
