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
from tvmrt.artifact import find_artifact, inspect_artifact, load_artifact
from tvmrt.artifact import forms as artifact_forms
from tvmrt.runtime import registry
from tvmrt.runtime.device_type import DLDeviceType

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
    ):
        assert place in text


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
