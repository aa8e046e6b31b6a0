"""The frontend: Python functions (written for one example) to functional-dialect IR.

`FunctionSource` parses a decorated function; `check_supported_syntax` rejects constructs outside
the subset at decoration; `ProgramBuilder` lowers the specializations reachable from entry
functions (one `functional.func` each) into a verified module.
"""

from abir.frontend.program import FunctionEntry, OpaqueNames, ProgramBuilder, SpecializationNames
from abir.frontend.source import FunctionSource
from abir.frontend.syntax import check_supported_syntax

__all__ = [
    "FunctionEntry",
    "FunctionSource",
    "OpaqueNames",
    "ProgramBuilder",
    "SpecializationNames",
    "check_supported_syntax",
]
