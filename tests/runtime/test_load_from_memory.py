"""Models loaded from memory (``load_module(bytes)``, ``load_artifact(ArtifactBytes(...))``):
every form ``load_module`` opens from a file runs from its bytes, bitwise equal to the
file-loaded run, and nothing of it is written to a disk-backed path.

The check that nothing is written runs the loads in a child process under ``strace -f``
(every ``open`` for writing, ``creat``, ``rename``, ``link`` and ``mkdir`` of the child and
the compilers it starts): the only paths written are memory-backed (the memfd, the private
scratch folder on ``/dev/shm``). Without strace the child still runs with empty ``TMPDIR``,
``HOME`` and ``TVMRT_CACHE_DIR`` folders, which must stay empty.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from support.mlf_aot_cases import fixture_root, golden, package_path, same_bits
from support.paths import REPO
from tvmrt import runtime
from tvmrt.artifact import ArtifactBytes, find_artifact, load_artifact
from tvmrt.contrib import graph_executor
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.executor import AotModule

DIGITS = REPO / "examples" / "digits" / "model"


def _factory_output(lib: runtime.Module, data: np.ndarray) -> np.ndarray:
    module = graph_executor.GraphModule(lib["default"](runtime.cpu()))
    module.set_input("data", data)
    module.run()
    return module.get_output(0).numpy()


@pytest.mark.parametrize("case", ["linkparams-so/deploy.so", "systemlib-tar/deploy.tar"])
def test_a_factory_library_or_export_tar_runs_from_its_bytes(artifacts: Path, case: str) -> None:
    path = artifacts / "relay016" / case
    with np.load(path.parent / "golden.npz") as npz:
        data, want = npz["data"], npz["output_0"]
    from_file = _factory_output(runtime.load_module(str(path)), data)
    from_bytes = _factory_output(runtime.load_module(path.read_bytes()), data)
    assert from_bytes.tobytes() == from_file.tobytes()
    np.testing.assert_allclose(from_bytes, want, rtol=1e-5, atol=1e-6)
    view = memoryview(bytearray(path.read_bytes()))  # any buffer
    assert _factory_output(runtime.load_module(view), data).tobytes() == from_file.tobytes()


def test_an_mlf_package_tar_runs_from_its_bytes() -> None:
    root = fixture_root()
    inputs, want = golden(root, "float_c_linked")
    factory = runtime.load_module(package_path(root, "float_c_linked", "tar").read_bytes())
    module = AotModule(factory["default"](runtime.cpu()))
    module.set_input(**inputs)
    module.run()
    for i, expected in enumerate(want):
        assert same_bits(module.get_output(i).numpy(), expected)


def test_a_folder_a_relay_vm_and_a_relax_model_load_from_bytes(artifacts: Path) -> None:
    image = np.load(DIGITS / "heldout.npz")["image"]
    files = find_artifact(DIGITS)
    outs = []
    for model in (
        load_artifact(files),
        load_artifact(
            ArtifactBytes(
                files.lib.read_bytes(),
                files.graph.read_text() if files.graph else None,
                files.params.read_bytes() if files.params else None,
            )
        ),
    ):
        model.executor.set_input("image", image)
        model.executor.run()
        outs.append(model.executor.get_output(0).numpy())
    assert outs[0].tobytes() == outs[1].tobytes()
    vm = artifacts / "relayvm" / "dyn-batch-mlp"
    with np.load(vm / "golden.npz") as npz:
        x, want = npz["x__batch3"], npz["output_0__batch3"]
    held = ArtifactBytes((vm / "lib.so").read_bytes(), code=(vm / "code.ro").read_bytes())
    for model in (load_artifact(held), load_artifact(ArtifactBytes((vm / "vm.so").read_bytes()))):
        assert model.form == "relay_vm"
        model.executor.set_input("x", x)
        model.executor.run()
        assert model.executor.get_output(0).numpy().tobytes() == want.tobytes()
    relax = artifacts / "relax027" / "cnn"
    with np.load(relax / "run0_inputs.npz") as npz:
        data = npz["arg0"]
    with np.load(relax / "run0_golden.npz") as npz:
        want = npz["out0"]
    model = load_artifact(ArtifactBytes((relax / "model.so").read_bytes()))
    assert model.form == "relax"
    model.executor.set_input(0, data)
    model.executor.run()
    assert model.executor.get_output(0).numpy().tobytes() == want.tobytes()


def test_bad_bytes_are_refused_naming_the_model_in_memory() -> None:
    with pytest.raises(ModuleLoadError, match="<model in memory>"):
        runtime.load_module(b"\x7fELF" + b"\0" * 60)
    from tvmrt.runtime.loaders.dispatch import load_module_memory

    with pytest.raises(OSError, match="takes bytes"):
        load_module_memory("deploy.so")  # type: ignore[arg-type]


_CHILD = r"""
import sys
from pathlib import Path
from tvmrt import runtime
from tvmrt.artifact import ArtifactBytes, load_artifact
for path in sys.argv[1:]:
    data = Path(path).read_bytes()
    if path.endswith("deploy.json"):
        continue
    if path.endswith("deploy.so") and (Path(path).parent / "deploy.json").exists():
        folder = Path(path).parent
        load_artifact(ArtifactBytes(data, (folder / "deploy.json").read_text(),
                                    (folder / "deploy.params").read_bytes()))
    else:
        runtime.load_module(data)
print("loaded", len(sys.argv) - 1)
"""

_WRITE = re.compile(r"^\d+\s+(open|openat|creat|rename\w*|link\w*|symlink\w*|mkdir\w*)\((.*)")


def _written(trace: str) -> list[str]:
    """The paths the traced processes opened for writing or created."""
    out = []
    for line in trace.splitlines():
        match = _WRITE.match(line)
        if match is None or "= -1" in line:
            continue
        call, rest = match.groups()
        paths = re.findall(r'"([^"]*)"', rest)
        if call in ("open", "openat"):
            if not re.search(r"O_WRONLY|O_RDWR|O_CREAT", rest):
                continue
            paths = paths[:1]
        out.extend(paths)
    return out


def _memory_backed(path: str) -> bool:
    return path.startswith(("/dev/shm/tvmrt-memory-", "/proc/", "/dev/null", "/dev/tty"))


def test_nothing_of_a_model_loaded_from_memory_reaches_a_disk(
    artifacts: Path, tmp_path: Path
) -> None:
    models = [
        artifacts / "relay016" / "linkparams-so" / "deploy.so",
        artifacts / "relay016" / "systemlib-tar" / "deploy.tar",  # linked: objects written
        package_path(fixture_root(), "float_c_linked", "tar"),  # compiled: C sources
        DIGITS / "deploy.so",  # with its graph and params, through load_artifact
    ]
    empty = {name: tmp_path / name for name in ("tmp", "home", "cache")}
    for folder in empty.values():
        folder.mkdir()
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO / "src"),
        PYTHONDONTWRITEBYTECODE="1",
        TMPDIR=str(empty["tmp"]),
        HOME=str(empty["home"]),
        TVMRT_CACHE_DIR=str(empty["cache"]),
    )
    argv = [sys.executable, "-c", _CHILD, *map(str, models)]
    strace = shutil.which("strace")
    trace = tmp_path / "trace.txt"
    if strace is not None:
        calls = "open,openat,creat,rename,renameat,renameat2,link,linkat,symlink,symlinkat,mkdir"
        argv = [strace, "-f", "-qq", "-e", f"trace={calls},mkdirat", "-o", str(trace), *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loaded {len(models)}", done.stdout
    for name, folder in empty.items():  # the cache and temporary folders saw nothing
        assert not list(folder.rglob("*")), (name, list(folder.rglob("*")))
    if strace is None:
        pytest.skip(
            "strace is not installed: only the cache, home and temporary folders were checked"
        )
    written = _written(trace.read_text())
    assert any(p.startswith("/dev/shm/tvmrt-memory-") for p in written), written  # linked there
    on_disk = sorted({p for p in written if not _memory_backed(p)})
    assert on_disk == [], on_disk
    assert not list(Path("/dev/shm").glob("tvmrt-memory-*")), "the scratch folder outlived its load"


def test_models_loaded_from_memory_one_after_another_stay_apart(artifacts: Path) -> None:
    # the C runtime dlopened a Relax model through the memfd's /proc/self/fd/N, closed N,
    # and the next library loaded through a memfd that got number N was dlopen's old one
    # (dlopen knows libraries by name): its kernels were "not found"
    relax = artifacts / "relax027" / "cnn"
    factory = artifacts / "relay016" / "linkparams-so" / "deploy.so"
    with np.load(factory.parent / "golden.npz") as npz:
        data, want = npz["data"], npz["output_0"]
    kept = []
    for _ in range(3):
        kept.append(load_artifact(ArtifactBytes((relax / "model.so").read_bytes())))
        # by its path: the loader's own memfd takes the lowest free number, the one just closed
        out = _factory_output(runtime.load_module(str(factory)), data)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        out = _factory_output(runtime.load_module(factory.read_bytes()), data)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert all(model.form == "relax" for model in kept)
