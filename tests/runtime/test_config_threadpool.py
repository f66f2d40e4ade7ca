"""``runtime.config_threadpool`` (TVM's global: affinity mode, thread count, CPUs) resizes the
kernel pool as TVM's does; it was missing (issue 47, item 4). tvmrt pins no threads, so the
mode and CPUs are checked and otherwise have no effect (docs/tvm-compat.md)."""

from __future__ import annotations

import pytest

from tvmrt import runtime


def test_it_sets_the_pool_size_and_zero_restores_the_default() -> None:
    config = runtime.get_global_func("runtime.config_threadpool")
    threads = runtime.get_global_func("runtime.NumThreads")
    default = threads()
    try:
        config(1, 2)  # kBig, two threads
        assert threads() == 2
        config(-1, 3, ["0", "1"])  # kLittle with a CPU list
        assert threads() == 3
    finally:
        config(1, 0)
    assert threads() == default


@pytest.mark.parametrize(
    ("args", "words"),
    [((7, 2), "affinity mode 7 is not one of TVM's"), ((1, 2, ["x"]), "'x' is not a number")],
)
def test_bad_arguments_are_refused_in_tvms_words(args: tuple[object, ...], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        runtime.get_global_func("runtime.config_threadpool")(*args)
