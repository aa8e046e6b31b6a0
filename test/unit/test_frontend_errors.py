"""Every construct outside abir's Python subset raises `UnsupportedSyntaxError` with the file,
the line of the offending construct, its source text and a suggestion."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from abir.context import Context
from abir.errors import UnsupportedSyntaxError


def line_of(function, text: str) -> int:
    """The line in this file of the first source line of `function` containing `text`."""
    lines, first = inspect.getsourcelines(function)
    for offset, line in enumerate(lines):
        if text in line:
            return first + offset
    raise AssertionError(f"{text!r} not in {function.__name__}")


def expect_error(function, marker: str, message: str) -> UnsupportedSyntaxError:
    """Decorating (or lowering) `function` fails at the line containing `marker`."""
    ctx = Context()
    with pytest.raises(UnsupportedSyntaxError) as info:
        ctx.batch()(function)
        ctx.module()
    error = info.value
    assert message in str(error), str(error)
    assert error.filename == __file__
    assert error.lineno == line_of(function, marker), str(error)
    assert marker in error.text
    assert error.suggestion
    assert "Instead:" in error.msg
    return error


# -- rejected at decoration -------------------------------------------------------------------


def test_with_statement():
    def f(x):
        with open("x"):  # here
            pass
        return x

    expect_error(f, "# here", "`with` statements are not supported")


def test_try_statement():
    def f(x):
        try:  # noqa: SIM105  # here
            x = x + 1
        except ValueError:
            pass
        return x

    expect_error(f, "# here", "`try` statements are not supported")


def test_yield():
    def f(x):
        yield x  # here

    expect_error(f, "# here", "generators")


def test_nested_def():
    def f(x):
        def g(y):  # here
            return y

        return x

    expect_error(f, "# here", "nested function definitions")


def test_global_and_nonlocal():
    def f(x):
        global SOMETHING  # here
        return x

    expect_error(f, "# here", "`global` declarations")

    y = 1

    def g(x):
        nonlocal y  # here
        return x

    expect_error(g, "# here", "`nonlocal` declarations")


def test_del():
    def f(x):
        y = x
        del y  # here
        return x

    expect_error(f, "# here", "`del` is not supported")


def test_star_args_and_kwargs_parameters():
    def f(*xs):  # here
        return xs

    expect_error(f, "# here", "`*xs` parameters")

    def g(x, **kw):  # here
        return x

    expect_error(g, "# here", "`**kw` parameters")


def test_default_and_keyword_only_parameters():
    def f(x, y=1):  # here
        return x

    expect_error(f, "# here", "default values")

    def g(x, *, y):  # here
        return x

    expect_error(g, "# here", "keyword-only parameters")


def test_lambda_as_batched_function():
    ctx = Context()
    with pytest.raises(UnsupportedSyntaxError, match="a lambda cannot be a batched function") as info:
        ctx.batch_uncurried(lambda x: x)
    assert info.value.suggestion == "write a named `def` function and decorate it"


def test_decorating_a_non_function():
    ctx = Context()
    with pytest.raises(UnsupportedSyntaxError, match="only Python functions can be batched"):
        ctx.batch()(np.sin)
    with pytest.raises(UnsupportedSyntaxError, match="only Python functions can be batched"):
        ctx.batch()(int)


def test_batch_without_parentheses():
    ctx = Context()
    with pytest.raises(UnsupportedSyntaxError, match="needs parentheses") as raised:

        @ctx.batch
        def f(x):
            return x

    where = str(raised.value).split(": ", 1)[0]  # file:line, no column to name
    assert where.endswith(f":{raised.value.lineno}") and "None" not in where


def test_duplicate_name():
    ctx = Context()

    def f(x):
        return x

    ctx.batch()(f)
    with pytest.raises(UnsupportedSyntaxError, match="already has a batched function named 'f'"):
        ctx.batch()(f)


# -- rejected when lowering -------------------------------------------------------------------


def test_comprehension_over_batched_values():
    def f(x):
        ys = [x * i for i in range(3)]  # here
        return ys[0]

    expect_error(f, "# here", "a list comprehension over the local variable(s) x")


def test_comprehension_over_compile_time_values_is_fine():
    ctx = Context()

    @ctx.batch()
    def f(x):
        ys = tuple([i * i for i in range(3)])
        return x + ys[2]

    assert "constant weak 4 : i64" in str(ctx.module())


def test_keyword_arguments_to_batched_functions():
    ctx = Context()

    @ctx.batch()
    def g(a):
        return a

    @ctx.batch()
    def f(x):
        return g(a=x)  # here

    with pytest.raises(UnsupportedSyntaxError, match="keyword arguments in calls to batched function 'g'") as info:
        ctx.module()
    assert info.value.lineno == line_of(f.python_function, "# here")


def test_batched_function_called_through_a_variable():
    ctx = Context()

    @ctx.batch()
    def g(a):
        return a

    @ctx.batch()
    def f(x):
        h = g
        return h(x)  # here

    with pytest.raises(UnsupportedSyntaxError, match="called directly by its own name") as info:
        ctx.module()
    assert info.value.lineno == line_of(f.python_function, "# here")


def test_wrong_number_of_arguments():
    ctx = Context()

    @ctx.batch()
    def g(a, b):
        return a

    @ctx.batch()
    def f(x):
        return g(x)  # here

    with pytest.raises(UnsupportedSyntaxError, match="'g' takes 2 argument"):
        ctx.module()


def test_star_args_in_calls():
    def f(x):
        return np.maximum(*x)  # here

    expect_error(f, "# here", "`*args` in calls")


def test_item_and_attribute_assignment():
    def f(x):
        x[0] = 1  # here
        return x

    expect_error(f, "# here", "item assignment")

    def g(x):
        x.y = 1  # here
        return x

    expect_error(g, "# here", "attribute assignment")


def test_appending_to_a_list():
    def f(n):
        xs = []
        i = 0
        while i < n:
            xs.append(i)  # here
            i += 1
        return n

    error = expect_error(f, "# here", "`xs.append(...)` would change a list in place, but abir's tuples and lists are "
                         "structures fixed at compile time")
    assert "`xs[i] = v`" in error.suggestion


def test_appending_to_an_array():
    def f(n):
        xs = n * 1.0
        xs.append(n)  # here
        return xs

    error = expect_error(f, "# here", "'.append()' is a list method, but `xs` is a per-member array here")
    assert "fixed-size array" in error.suggestion


def test_unpacking_a_single_array():
    def f(x):
        a, b = x  # here
        return a

    expect_error(f, "# here", "cannot unpack a single array into 2 names")


def test_different_return_structures():
    def f(x):
        if x > 0:
            return x, x
        return x  # here

    error = expect_error(f, "# here", "returns the structure (*, *) at line")
    assert "but a single value at line" in str(error)


def test_recursion_without_base_case():
    def f(x):
        return f(x - 1)  # here

    expect_error(f, "# here", "cannot tell what 'f' returns")


def test_attribute_of_batched_value():
    def f(x):
        return x.shape  # here

    expect_error(f, "# here", "attribute '.shape' of a batched value")


def test_indexing_with_a_per_member_slice_bound():
    def f(x, n):
        return x[:n]  # here

    expect_error(f, "# here", "slice bounds must be compile-time constants")


def test_unknown_method_of_batched_value():
    def f(x):
        return x.tofile("x.bin")  # here

    expect_error(f, "# here", "the method '.tofile()' of a batched value is not supported")


def test_non_numeric_value_as_batched_value():
    def f(x):
        return x + "a"  # here

    expect_error(f, "# here", "the str 'a' cannot be used as a batched value")


def test_undefined_name():
    def f(x):
        return x + not_defined_anywhere  # noqa: F821  # here

    expect_error(f, "# here", "name 'not_defined_anywhere' is not defined")


def test_for_over_batched_value():
    def f(x):
        for v in x:  # here
            x = v
        return x

    expect_error(f, "# here", "`for` loops iterate over range(...)")


def test_range_outside_for():
    def f(x):
        r = range(x)  # here
        return r

    expect_error(f, "# here", "range() is supported only as the iterable of a `for` loop")


# -- maybe-undefined variables ----------------------------------------------------------------


def test_variable_defined_on_one_branch_only():
    def f(x):
        if x > 0:
            y = x
        return y  # here

    error = expect_error(f, "# here", "variable 'y' may be undefined here")
    assert f"line {line_of(f, 'y = x')}" in str(error)


def test_variable_defined_only_inside_a_loop():
    def f(x):
        while x > 0:
            last = x
            x = x - 1
        return last  # here

    expect_error(f, "# here", "variable 'last' may be undefined here")


def test_variable_used_before_assignment():
    def f(x):
        z = y + x  # noqa: F821  # here
        y = 1  # noqa: F841
        return z

    expect_error(f, "# here", "variable 'y' is used before it is assigned")


def test_variable_defined_on_the_path_that_uses_it_is_fine():
    ctx = Context()

    @ctx.batch()
    def f(x):
        if x > 0:
            y = x * 2
            return y
        while x < 10:
            z = x + 1
            x = z
        return x

    ctx.module().verify()


def test_loop_changing_the_structure_of_a_variable():
    def f(x):
        s = x
        while x > 0:  # here
            s = (s, x)
            x = x - 1
        return s

    expect_error(f, "# here", "variable 's' is a single value when the loop starts")


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("raise ValueError(x)", "`raise` is not supported"),
        ("assert x > 0", "`assert` is not supported"),
        ("import math", "imports inside a batched function"),
        ("from math import sin", "imports inside a batched function"),
        ("class C:\n        pass", "class definitions inside a batched function"),
        ("match x:\n        case 1:\n            pass", "`match` statements are not supported"),
    ],
)
def test_other_unsupported_statements(tmp_path, source, message):
    path = tmp_path / "user_module.py"
    path.write_text(f"def f(x):\n    {source}\n    return x\n")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    with pytest.raises(UnsupportedSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        Context().batch()(namespace["f"])
    assert info.value.filename == str(path)
    assert info.value.lineno == 2
    assert info.value.text.strip() == source.splitlines()[0]
    assert info.value.suggestion
