"""``GraphExecutorFactory``: graph JSON + params + kernel library in one module.

This is the root module of a library exported by TVM's ``relay.build(...).export_library``:
``lib["default"](dev)`` creates an executor with the embedded params. Libraries saved
by TVM <= 0.7 call it ``GraphRuntimeFactory``; both names load.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tvmrt.binfmt.stream import ByteReader, ByteWriter
from tvmrt.error import ArgumentTypeError, FunctionNotFoundError, ModuleLoadError, TVMError
from tvmrt.runtime.device import Device
from tvmrt.runtime.graph_executor import native
from tvmrt.runtime.graph_executor.executor import GraphExecutor
from tvmrt.runtime.graph_executor.graph import parse_graph
from tvmrt.runtime.graph_executor.linked import linked_params
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func
from tvmrt.runtime.tensor_record import read_ndarray, write_ndarray

__all__ = ["GraphExecutorFactory", "create_factory", "load_factory_binary", "save_factory_binary"]


class GraphExecutorFactory(Module):
    """A factory of graph executors over its imported kernel library.

    Parameters
    ----------
    graph_json
        The graph JSON text.
    params
        Name → array, bound to the inputs of each executor the factory creates.
    module_name
        Name of the creating function (``"default"``).
    lib
        The kernel library; it becomes the factory's first import.

    Notes
    -----
    The kernel library is the factory's first import (``lib``, or the ``_lib`` entry of the
    module blob it was loaded from). Weights a TVM 0.7/0.8 ``link-params`` library holds in
    its code (:mod:`tvmrt.runtime.graph_executor.linked`) join ``params`` then, under the
    names not given explicitly.

    Executors created by one factory use the factory's param arrays without copying
    them (as :meth:`GraphModule.share_params` does), so weights are held once however
    many executors are created. A param changed with ``set_input`` on one executor is
    therefore changed for all of them.
    """

    def __init__(
        self,
        graph_json: str,
        params: Mapping[str, NDArray],
        module_name: str = "default",
        lib: Module | None = None,
    ) -> None:
        super().__init__()
        self.graph_json = graph_json
        self.params = dict(params)
        self.module_name = module_name
        self._graph = parse_graph(graph_json)
        if lib is not None:
            self.import_module(lib)

    @property
    def type_key(self) -> str:
        return "GraphExecutorFactory"

    def import_module(self, module: Module) -> None:
        """Add ``module`` to the imports; the first is the kernel library."""
        first = not self._imports
        super().import_module(module)
        if first:  # TVM 0.7/0.8 link-params: weights in the code are params too
            for name, value in linked_params(module, self._graph).items():
                self.params.setdefault(name, value)

    @property
    def lib(self) -> Module:
        """The kernel library (first import)."""
        if not self._imports:
            raise ModuleLoadError("the graph executor factory has no kernel library imported")
        return self._imports[0]

    def _get_function(self, name: str) -> PackedFunc | None:
        table: dict[str, Callable[..., Any]] = {
            self.module_name: self.create_executor,
            "get_graph_json": lambda: self.graph_json,
            "get_graph_params": lambda: dict(self.params),
            "remove_params": self.remove_params,
            "debug_create": self.debug_create,
            "cuda_graph_create": self._cuda_graph_create,
        }
        func = table.get(name)
        return None if func is None else PackedFunc(func, name)

    def create_executor(self, *devices: Device) -> Module:
        """A new executor on ``devices`` with this factory's params bound: the C runtime's
        where it runs the graph (:mod:`~tvmrt.runtime.graph_executor.native`), else a
        :class:`GraphExecutor`."""
        if not devices:
            raise ArgumentTypeError(f"{self.module_name}() needs at least one device")
        made = native.create(self.graph_json, self.lib, devices, self.params, root=self)
        if made is not None:
            return made
        return GraphExecutor(self._graph, self.lib, list(devices), preset=self.params)

    def debug_create(self, module_name: str, *devices: Device) -> Module:
        """A debug executor (``GraphExecutorDebug``) with this factory's params: the C
        runtime's where it runs the graph, as :meth:`create_executor`."""
        if module_name != self.module_name:
            raise TVMError(
                f"debug_create: the factory holds model {self.module_name!r}, not "
                f"{module_name!r} (Currently we only support single model for now.)"
            )
        made = native.create(self.graph_json, self.lib, devices, self.params, self, debug=True)
        if made is not None:
            return made
        create = get_global_func("tvm.graph_executor_debug.create")
        executor = create(self.graph_json, self.lib, *devices)
        set_input = executor.get_function("set_input")
        input_index = executor.get_function("get_input_index")
        for name, arr in self.params.items():
            if input_index(name) >= 0:  # as TVM: params the graph does not use are ignored
                set_input(name, arr)
        assert isinstance(executor, Module)
        return executor

    def remove_params(self) -> GraphExecutorFactory:
        """The same factory without params (ship the weights separately)."""
        removed = GraphExecutorFactory(self.graph_json, {}, self.module_name, self.lib)
        removed.params.clear()  # link-params weights too: its executors read them from lib
        return removed

    def _cuda_graph_create(self, *devices: Device) -> Module:
        raise FunctionNotFoundError(
            "Cannot find function tvm.graph_executor_cuda_graph.create in registry: "
            "tvmrt has no CUDA graph executor"
        )


def create_factory(
    graph_json: str, lib: Module, module_name: str, *params: Any
) -> GraphExecutorFactory:
    """TVM's ``tvm.graph_executor_factory.create``: a factory over ``lib``.

    ``params`` are ``name0, array0, name1, array1, ...``, as TVM's
    ``GraphExecutorFactoryModule`` passes them.
    """
    if len(params) % 2:
        raise ArgumentTypeError(
            "tvm.graph_executor_factory.create: params come as name, array pairs "
            f"(got {len(params)} values)"
        )
    named: dict[str, NDArray] = {}
    for name, value in zip(params[0::2], params[1::2], strict=True):
        if not isinstance(name, str) or not isinstance(value, NDArray):
            raise ArgumentTypeError(
                "tvm.graph_executor_factory.create: a param is a name (str) and an NDArray, "
                f"got {type(name).__name__} and {type(value).__name__}"
            )
        named[name] = value
    return GraphExecutorFactory(graph_json, named, module_name, lib)


def load_factory_binary(reader: ByteReader) -> GraphExecutorFactory:
    """Read a factory's ``SaveToBinary`` payload from ``reader``.

    The payload is ``string graph_json``, ``u64 count``, ``count`` param names, ``count``
    tensor records, ``string module_name`` (:func:`save_factory_binary` writes it).
    """
    graph_json = reader.string("graph_json")
    count = reader.count("number of params", 8)
    names = reader.strings("param names")
    if len(names) != count:
        raise reader.fail(f"factory lists {count} params but {len(names)} names")
    arrays = [read_ndarray(reader) for _ in range(count)]
    module_name = reader.string("module_name")
    return GraphExecutorFactory(graph_json, dict(zip(names, arrays, strict=True)), module_name)


def save_factory_binary(factory: GraphExecutorFactory) -> bytes:
    """The factory's ``SaveToBinary`` payload, as TVM writes it."""
    writer = ByteWriter()
    writer.string(factory.graph_json)
    writer.u64(len(factory.params))
    writer.strings(list(factory.params))
    for arr in factory.params.values():
        write_ndarray(writer, arr)
    writer.string(factory.module_name)
    return bytes(writer.buffer)
