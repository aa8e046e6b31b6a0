"""abir's passes (one per file) and the registry abir-opt and the Context use.

Each entry maps a pass's kebab-case name to a lazy factory returning the pass class.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    """Every abir pass by name. Only real, working passes are listed here."""
    return {}
