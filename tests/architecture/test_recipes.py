"""docs/architecture.md's recipes, followed literally: one new file, one line in one table.

Each test writes the new file into a temporary folder on ``sys.path`` (standing in for a
file under ``src/tvmrt``), adds the one registration line the recipe names, and checks
that the public route reaches it with nothing else changed.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from support.paths import REPO
from tvmrt import runtime
from tvmrt.artifact import Executor, find_artifact, inspect_artifact, load_artifact
from tvmrt.artifact import forms as artifact_forms
from tvmrt.runtime import registry
from tvmrt.runtime.device_type import DLDeviceType
from tvmrt.serve import load_model

device_module = importlib.import_module("tvmrt.runtime.device")  # not runtime.device()
DOC = REPO / "docs" / "architecture.md"


@pytest.fixture
def new_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for the recipe's new file; its modules are forgotten after."""
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("recipe_"):
            del sys.modules[name]


def test_the_doc_names_the_tables_the_tests_use() -> None:
    text = DOC.read_text()
    for place in (
        "`_lazy` in `src/tvmrt/runtime/device.py`",
        "`FORMS` in `src/tvmrt/artifact/forms/__init__.py`",
        "`BUILTIN_FUNCTIONS` in\n`src/tvmrt/runtime/builtins.py`",
        "`Executor` protocol (`src/tvmrt/runtime/executor/protocol.py`",
    ):
        assert place in text


def test_the_doc_names_every_native_source() -> None:
    """Every C file both builds compile (src/tvmrt/_native/sources.txt) is named in the map."""
    text = DOC.read_text()
    sources = REPO / "src" / "tvmrt" / "_native" / "sources.txt"
    rows = [line.split() for line in sources.read_text().splitlines()]
    files = [Path(row[0]).name for row in rows if row and not row[0].startswith("#")]
    assert files, "sources.txt lists no file"
    assert [f for f in files if f"`{f}`" not in text] == []


def test_a_device_backend_is_one_file_and_one_line(
    new_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (new_module / "recipe_backend.py").write_text(
        textwrap.dedent(
            """
            from tvmrt.runtime.device_api import HostDeviceAPI

            class RecipeDeviceAPI(HostDeviceAPI):
                name = "recipe"

                def attribute(self, dev, name):
                    if name == "exist":
                        return dev.device_id == 0
                    return "recipe device" if name == "device_name" else None

            def backend():
                return RecipeDeviceAPI()
            """
        )
    )
    device_type = int(DLDeviceType.kDLVulkan)
    monkeypatch.setattr(device_module, "_backends", dict(device_module._backends))
    monkeypatch.setattr(device_module, "_lazy", dict(device_module._lazy))
    device_module._backends.pop(device_type, None)
    device_module._lazy[device_type] = "recipe_backend:backend"  # the recipe's one line

    dev = runtime.vulkan(0)
    assert dev.exist
    assert dev.device_name == "recipe device"
    arr = runtime.array(np.arange(6, dtype="float32"), dev)
    assert arr.device == dev
    assert arr.numpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_a_runtime_function_is_one_file_and_one_line(
    new_module: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (new_module / "recipe_function.py").write_text("def twice(x):\n    return 2 * x\n")
    name = "tvm.contrib.recipe.twice"
    monkeypatch.setattr(registry, "_builtins", dict(registry._builtins))
    monkeypatch.setattr(registry, "_functions", dict(registry._functions))
    registry._builtins[name] = "recipe_function:twice"  # the recipe's one line
    assert "recipe_function" not in sys.modules  # found by name, imported on first use
    assert name in runtime.list_global_func_names()
    assert runtime.get_global_func(name)(21) == 42


def test_an_artifact_form_is_one_file_and_one_entry(
    new_module: Path, monkeypatch: pytest.MonkeyPatch, artifacts: Path
) -> None:
    # a form that claims graph-less factory libraries named *.recipe.so and loads them
    # as the factory form does, marking what it built
    (new_module / "recipe_form.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import replace

            from tvmrt.artifact.forms import factory
            from tvmrt.artifact.forms.base import ArtifactForm

            def claims(files, sniffed):
                return files.graph is None and files.lib.name.endswith(".recipe.so")

            def load(request, lib):
                return replace(factory.FORM.load(request, lib), form="recipe")

            def inspect(files, sniffed, found, problems):
                factory.FORM.inspect(files, sniffed, found, problems)
                found.library.extra["recipe"] = True

            FORM = ArtifactForm("recipe", "a factory library named *.recipe.so", claims, load, inspect)
            """
        )
    )
    lib = new_module / "model.recipe.so"
    lib.write_bytes((artifacts / "relay016" / "linkparams-so" / "deploy.so").read_bytes())
    form = importlib.import_module("recipe_form").FORM
    monkeypatch.setattr(artifact_forms, "FORMS", (form, *artifact_forms.FORMS))  # the entry

    files = find_artifact(lib)
    model = load_artifact(files)
    assert model.form == "recipe"
    golden = np.load(artifacts / "relay016" / "linkparams-so" / "golden.npz")
    for info in model.executor.inputs:
        model.executor.set_input(info.name, golden[info.name])
    model.executor.run()
    assert np.array_equal(model.executor.get_output(0).numpy(), golden["output_0"])
    report = inspect_artifact(files).to_dict()
    assert report["library"].get("recipe") is True


def test_an_executor_is_an_engine_module_and_tvms_face_over_it(
    new_module: Path, monkeypatch: pytest.MonkeyPatch, artifacts: Path
) -> None:
    # the engine: a module with TVM's executor functions (here: y = 2 * x); the face over
    # its packed functions meets the Executor protocol itself; one form builds the face
    (new_module / "recipe_executor.py").write_text(
        textwrap.dedent(
            """
            from tvmrt.runtime import PyModule, empty
            from tvmrt.runtime.executor.protocol import ModuleFace, TensorInfo

            def engine(dev):
                x, y = empty((1, 4), "float32", dev), empty((1, 4), "float32", dev)
                arrays = {"x": x, 0: x}
                return PyModule({
                    "set_input": lambda key, value: arrays[key].copyfrom(value),
                    "get_input": lambda key: arrays[key],
                    "get_input_index": lambda name: 0 if name == "x" else -1,
                    "get_num_inputs": lambda: 1,
                    "run": lambda: y.copyfrom(x.numpy() * 2),
                    "get_output": lambda index, out=None: y,
                    "get_num_outputs": lambda: 1,
                }, "DoubleExecutor")

            class DoubleModule(ModuleFace):
                def __init__(self, module, make):
                    super().__init__(module)
                    self._make = make

                def get_input(self, key):
                    return self._get_input(key)

                @property
                def inputs(self):
                    x = self.get_input(0)
                    return [TensorInfo("x", tuple(x.shape), str(x.dtype))]

                @property
                def outputs(self):
                    y = self.get_output(0)
                    return [TensorInfo("y", tuple(y.shape), str(y.dtype))]

                def output_labels(self):
                    return ["y"]

                def weight_problems(self, given):
                    return []

                def replicate(self, count):
                    return [DoubleModule(self._make(), self._make) for _ in range(count)]
            """
        )
    )
    (new_module / "recipe_double_form.py").write_text(
        textwrap.dedent(
            """
            from tvmrt.artifact.forms import factory
            from tvmrt.artifact.forms.base import ArtifactForm
            from tvmrt.artifact.model import LoadedModel
            from recipe_executor import DoubleModule, engine

            def claims(files, sniffed):
                return files.lib.name.endswith(".double.so")

            def load(request, lib):
                make = lambda: engine(request.device)
                return LoadedModel(DoubleModule(make(), make), lib, request.files, "double")

            FORM = ArtifactForm("double", "a doubling executor", claims, load, factory.FORM.inspect)
            """
        )
    )
    lib = new_module / "model.double.so"
    lib.write_bytes((artifacts / "relay016" / "linkparams-so" / "deploy.so").read_bytes())
    form = importlib.import_module("recipe_double_form").FORM
    monkeypatch.setattr(artifact_forms, "FORMS", (form, *artifact_forms.FORMS))  # the entry

    files = find_artifact(lib)
    model = load_artifact(files)
    assert model.form == "double"
    assert isinstance(model.executor, Executor)
    x = np.arange(4, dtype="float32").reshape(1, 4)
    served = load_model("double", files, workers=2)  # serve runs it unchanged
    try:
        (y,) = served.infer_sync({"x": x})
    finally:
        served.close()
    np.testing.assert_array_equal(y, x * 2)


@pytest.fixture(scope="module")
def rpc_server() -> Iterator[int]:
    """The port of a ``tvmrt rpc server`` on this machine (standing in for a board)."""
    from support.rpc_server import tvmrt_rpc

    with tvmrt_rpc("server") as (_, port):
        yield port


def test_a_remote_device_is_a_device_whose_backend_offers_a_session(
    rpc_server: int, artifacts: Path
) -> None:
    from tvmrt import rpc
    from tvmrt.runtime.device import RPC_SESS_MASK, find_device_api
    from tvmrt.runtime.remote_session import RemoteSession, remote_session

    assert "`RemoteSession` in `src/tvmrt/runtime/remote_session.py`" in DOC.read_text()
    folder = artifacts / "relay016" / "systemlib-so"
    golden = np.load(folder / "golden.npz")
    with rpc.connect("127.0.0.1", rpc_server) as session:
        dev = session.cpu()
        assert dev.device_type >= RPC_SESS_MASK  # the session is in the device type
        api = find_device_api(dev.device_type)
        assert isinstance(getattr(api, "session", None), RemoteSession)  # what the transport offers
        assert isinstance(remote_session(dev), RemoteSession)
        model = load_artifact(find_artifact(folder / "deploy.so"), dev)  # the one road
        model.executor.set_input("data", golden["data"])
        model.executor.run()
        assert np.array_equal(model.executor.get_output(0).numpy(), golden["output_0"])


def test_a_remote_capable_form_is_one_flag(
    new_module: Path, monkeypatch: pytest.MonkeyPatch, artifacts: Path, rpc_server: int
) -> None:
    from tvmrt import rpc
    from tvmrt.error import UnsupportedError

    assert "pass `remote=True` to its `ArtifactForm(...)`" in DOC.read_text()
    # the form of the artifact-form recipe, its load asking the library only for packed
    # functions (root_key, not lib.type_key), once with remote=True and once without
    (new_module / "recipe_remote_form.py").write_text(
        textwrap.dedent(
            """
            from tvmrt.artifact.forms import factory
            from tvmrt.artifact.forms.base import ArtifactForm
            from tvmrt.artifact.forms.graph_build import FACTORY_KINDS, load_graph_model

            def claims(files, sniffed):
                return files.graph is None and files.lib.name.endswith(".recipe.so")

            def load(request, lib):
                assert request.root_key(lib) in FACTORY_KINDS
                return load_graph_model("recipe", request, lib, None)

            FORM = ArtifactForm(
                "recipe", "a factory library named *.recipe.so", claims, load,
                factory.FORM.inspect, remote=True,
            )
            LOCAL_ONLY = ArtifactForm(
                "recipe", "a factory library named *.recipe.so", claims, load,
                factory.FORM.inspect,
            )
            """
        )
    )
    lib = new_module / "model.recipe.so"
    lib.write_bytes((artifacts / "relay016" / "linkparams-so" / "deploy.so").read_bytes())
    golden = np.load(artifacts / "relay016" / "linkparams-so" / "golden.npz")
    recipe = importlib.import_module("recipe_remote_form")
    files = find_artifact(lib)
    with rpc.connect("127.0.0.1", rpc_server) as session:
        monkeypatch.setattr(artifact_forms, "FORMS", (recipe.FORM, *artifact_forms.FORMS))
        model = load_artifact(files, session.cpu())
        assert model.form == "recipe"
        assert model.lib.type_key == "rpc"  # the server's module
        for info in model.executor.inputs:
            model.executor.set_input(info.name, golden[info.name])
        model.executor.run()
        assert np.array_equal(model.executor.get_output(0).numpy(), golden["output_0"])
        monkeypatch.setattr(artifact_forms, "FORMS", (recipe.LOCAL_ONLY, *artifact_forms.FORMS))
        with pytest.raises(UnsupportedError, match="artifact form 'recipe'"):
            load_artifact(files, session.cpu())
