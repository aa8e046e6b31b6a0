"""abir's dialects (one file each) and the registry of every dialect abir-opt understands."""

from collections.abc import Callable

from xdsl.ir import Dialect


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Lazy factories for our three dialects and the upstream ones our IR uses."""

    def get_builtin() -> Dialect:
        from xdsl.dialects.builtin import Builtin

        return Builtin

    def get_cf() -> Dialect:
        from xdsl.dialects.cf import Cf

        return Cf

    def get_arith() -> Dialect:
        from xdsl.dialects.arith import Arith

        return Arith

    def get_func() -> Dialect:
        from xdsl.dialects.func import Func

        return Func

    def get_functional() -> Dialect:
        from abir.dialects.functional import Functional

        return Functional

    def get_stack() -> Dialect:
        from abir.dialects.stack import Stack

        return Stack

    def get_vm() -> Dialect:
        from abir.dialects.vm import Vm

        return Vm

    return {
        "builtin": get_builtin,
        "cf": get_cf,
        "arith": get_arith,
        "func": get_func,
        "functional": get_functional,
        "stack": get_stack,
        "vm": get_vm,
    }


def make_context():
    """An xDSL context with every dialect of `get_all_dialects` registered (loaded lazily)."""
    from xdsl.context import Context

    ctx = Context()
    for name, factory in get_all_dialects().items():
        ctx.register_dialect(name, factory)
    return ctx
