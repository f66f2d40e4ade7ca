"""The Relay VM in C (``libtvmrt_runtime``) behind TVM's Python face.

:class:`~tvmrt.runtime.vm.VirtualMachine` runs here when it can (docs/c_runtime.md, "The
Relay VM from Python"): the C runtime loads the executable from its file (``vm.so``, or
``code.ro``'s bytes and ``lib.so`` through ``runtime.Load_Executable``), and the functions
of its ``VirtualMachine`` module are called as every C runtime function is from Python,
through :mod:`tvmrt.runtime.native_module` (the glue's FastCall): an NDArray goes in as the
C array that views it, an :class:`~tvmrt.runtime.container.ADT` as a C ADT, and results
come back as NDArrays of the C arrays and ADTs of them.

What the C VM may view without owning it (a DLTensor of an array the C runtime cannot wrap:
read-only, bool; TVM's ``NDArray::FromExternalDLTensor``) is kept here until a later call
replaces it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tvmrt.error import UnsupportedError
from tvmrt.runtime.loaders.needs import c_runtime_refusal
from tvmrt.runtime.module import Module, PyModule
from tvmrt.runtime.native_module import NativeModule, c_global, load_fresh
from tvmrt.runtime.vm.interpreter import VMLimits

__all__ = ["NativeVM", "library_refusal", "native_module", "native_source"]


def native_source(mod: Module) -> tuple[Any, ...] | None:
    """Where the C runtime can load ``mod`` (a ``VMExecutable``) from, or None.

    ``("so", path)`` for a ``vm.so`` read by ``load_module``; ``("ro", code, lib path)``
    for ``Executable.load_exec(code.ro bytes, load_module(lib.so))``.
    """
    if mod.source_file is not None:
        return ("so", mod.source_file)
    code = getattr(mod, "code_bytes", None)
    imports = mod.imported_modules
    if code is not None and imports and imports[0].source_file is not None:
        return ("ro", code, imports[0].source_file)
    return None


def library_refusal(source: tuple[Any, ...], loaded: Module | None = None) -> str:
    """Why the C runtime must not run the kernel library of ``source`` from Python ("" if
    it may): :func:`tvmrt.runtime.loaders.needs.c_runtime_refusal` of its path, ``loaded``
    the module the Python loader made of that file."""
    return c_runtime_refusal(source[1] if source[0] == "so" else source[2], loaded)


class NativeVM(PyModule):
    """The C runtime's ``VirtualMachine`` module over one executable, with :attr:`limits`
    (a :class:`VMLimits` whose changes reach the C VM: ``tvmrt serve`` sets
    ``max_live_bytes`` per worker).

    Parameters
    ----------
    source
        :func:`native_source`'s ``("so", vm.so path)`` or ``("ro", code.ro bytes, lib.so
        path)``.
    init_args
        ``init``'s (device type, device id, allocator) triples.
    """

    def __init__(
        self, source: tuple[Any, ...], init_args: Sequence[int], late_bound: Sequence[str] = ()
    ) -> None:
        if source[0] == "so":
            self.executable = load_fresh(source[1])
        else:
            self.executable = c_global("runtime.Load_Executable")(
                bytes(source[1]), load_fresh(source[2])
            )
        for path in late_bound:  # what the Python executable loaded, read by the C one
            self.executable["load_late_bound_consts"](path)
        vm: NativeModule = self.executable["vm_load_executable"]()
        super().__init__({}, vm.type_key)
        for name in ("init", "invoke", "invoke_stateful", "get_output", "get_num_outputs"):
            self.add_function(name, vm[name])
        self.add_function("get_input_index", vm["get_input_index"])
        self._vm_set_input, self._vm_set_one = vm["set_input"], vm["set_one_input"]
        self._vm_invoke_to = vm["invoke_return_to_device"]
        self._vm_set_limits = vm["set_limits"]
        self.profile_start, self.profile_stop = vm["profile_start"], vm["profile_stop"]
        self.add_function("set_input", self.set_input)
        self.add_function("set_one_input", self.set_one_input)
        self.add_function("invoke_return_to_device", self.invoke_return_to_device)
        # the inputs the C VM may view, per function: the last set_input's arguments, and
        # set_one_input's by key; what a failed call passed stays beside them
        self._held: dict[str, Any] = {}
        self._held_one: dict[str, dict[object, Any]] = {}
        vm["init"](*init_args)
        self.limits = _Limits(self)  # what the Python interpreter would take (same variables)

    def _hold(self, func_name: str, args: tuple[object, ...]) -> None:
        """Keep ``args`` beside what the C VM held for ``func_name`` (a call that fails part
        way leaves it holding some of each)."""
        self._held[func_name] = (self._held.get(func_name), args)

    def _took(self, func_name: str, args: tuple[object, ...]) -> None:
        """The call succeeded: every input of ``func_name`` is one of ``args`` now."""
        self._held[func_name] = args
        self._held_one.pop(func_name, None)

    def set_input(self, func_name: str, *args: object) -> None:
        self._hold(func_name, args)
        self._vm_set_input(func_name, *args)
        self._took(func_name, args)

    def set_one_input(self, func_name: str, key: int | str, value: object) -> None:
        held = self._held_one.setdefault(func_name, {})
        before = held.get(key)
        held[key] = (before, value)
        self._vm_set_one(func_name, key, value)
        held[key] = value

    def invoke_return_to_device(
        self, func_name: str, dev_type: int, dev_id: int, *args: object
    ) -> Any:
        """Set ``func_name``'s inputs and run it in one C call (the CPU only)."""
        self._hold(func_name, args)
        result = self._vm_invoke_to(func_name, dev_type, dev_id, *args)
        self._took(func_name, args)
        return result

    def set_limits(self, limits: VMLimits) -> None:
        """The C VM's bounds from ``limits`` (None: no limit)."""
        steps, alloc, live = limits.max_steps, limits.max_alloc_bytes, limits.max_live_bytes
        self._vm_set_limits(
            int(limits.max_frames),
            0 if steps is None else int(steps),
            -1 if alloc is None else int(alloc),
            -1 if live is None else int(live),
        )


def native_module(
    source: tuple[Any, ...] | None, init_args: Sequence[int], late_bound: Sequence[str] = ()
) -> NativeVM:
    """A ``VirtualMachine`` module (TVM's packed functions) running on the C VM; the C
    executable loads the late-bound constants of the files in ``late_bound``, in order."""
    if source is None:
        raise UnsupportedError("the executable was not loaded from a file")
    return NativeVM(source, init_args, late_bound)


class _Limits(VMLimits):
    """:class:`VMLimits` that sets the C VM's bounds whenever one changes."""

    def __init__(self, vm: NativeVM) -> None:
        object.__setattr__(self, "_vm", None)
        super().__init__()
        object.__setattr__(self, "_vm", vm)
        vm.set_limits(self)

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        vm = getattr(self, "_vm", None)
        if vm is not None:
            vm.set_limits(self)
