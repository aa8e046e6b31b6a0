"""`abir-opt`: xdsl-opt with abir's dialects and passes registered.

    abir-opt prog.mlir -p infer-types,abir-lower
    abir-opt prog.mlir --print-op-generic | abir-opt
"""

from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from abir.dialects import get_all_dialects
from abir.passes import get_all_passes


class AbirOptMain(xDSLOptMain):
    """The xDSL optimizer driver, restricted to the dialects abir's IR uses."""

    version_format = "abir-opt built from xdsl version {xdsl_version}"

    def register_all_dialects(self) -> None:
        for name, factory in get_all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()  # keeps canonicalize, cse, dce, ...
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)


def main(args: Sequence[str] | None = None) -> None:
    AbirOptMain(description="abir modular optimizer driver", args=args).run()


if __name__ == "__main__":
    main()
