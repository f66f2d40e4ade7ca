"""Issue 33 item 3: ``tvmrt inspect`` says "runs here: yes" exactly when ``tvmrt run`` runs.

Every artifact of the suite is tried both ways: each folder of $TVMRT_ARTIFACTS and each
library file in it, the field-style builds of tests/field/build_field_fixtures.py (a tvmc
package over a nested aarch64 ``mod.tar``, the host part of an OpenCL build saved alone,
an export tar beside the ``.tar.so`` TVM's ``load_module`` leaves), the MLF AOT packages of
tests/mlf_aot, the Neo folders of tests/dlr, and an Android (bionic) library built here.
``inspect`` is :func:`inspect_artifact` (what ``tvmrt inspect`` prints and exits by);
``run`` is the ``tvmrt run`` command in this process, on the device ``inspect`` names
(``--device opencl`` for OpenCL kernels, ``--device cuda`` for CUDA ones), with a Relay VM's inputs from its golden file
(or zeros of the shapes its Neo ``compiled.meta`` gives: its shapes are dynamic) and
random inputs otherwise. A test fails listing every
artifact where the two disagree.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.built import built
from support.cuda_fixtures import cuda_fixtures
from support.mlf_aot_cases import fixture_root
from support.opencl import opencl_unusable
from support.paths import REPO
from tvmrt.artifact import find_artifact, inspect_artifact, load_artifact
from tvmrt.cli import main as cli_main
from tvmrt.error import TVMError

_LIBS = (".so", ".tar", ".o", ".dll", ".dylib")
DLR_SCRIPT = REPO / "tests" / "dlr" / "build_neo_fixtures.py"


def candidates(root: Path) -> list[Path]:
    """Each folder holding files, and each library file in it (a VM's lib.so is not one)."""
    found = []
    for folder in sorted(p for p in [root, *root.rglob("*")] if p.is_dir()):
        files = sorted(f for f in folder.iterdir() if f.is_file())
        if not files:
            continue
        found.append(folder)
        found.extend(f for f in files if f.suffix in _LIBS and f.name != "lib.so")
    return found


def _inspect(path: Path) -> tuple[bool, str, str]:
    """(runs here, the first problem, the device to run on)."""
    try:
        report = inspect_artifact(find_artifact(path))
    except (TVMError, OSError) as exc:  # tvmrt inspect exits 1 with this message
        return False, str(exc), "cpu"
    code = (report.library.device_code or "").lower()
    device = "opencl" if "opencl" in code else "cuda" if "--device cuda" in code else "cpu"
    return report.runnable, (report.problems or [""])[0], device


def _vm_inputs(path: Path, tmp: Path) -> list[str]:
    folder = path if path.is_dir() else path.parent
    golden = folder / "golden.npz"
    meta = folder / "compiled.meta"  # a Neo Relay VM folder describes its inputs
    if (folder / "code.ro").exists() and meta.exists():
        described = json.loads(meta.read_text())["Model"]["Inputs"]
        zeros = {
            i["name"]: np.zeros([max(d, 1) for d in i["shape"]], dtype=i["dtype"])
            for i in described
        }
        np.savez(tmp / "vm_inputs.npz", **zeros)
        return ["-i", str(tmp / "vm_inputs.npz")]
    if (not (folder / "code.ro").exists() and path.name != "vm.so") or not golden.exists():
        return []
    with np.load(golden) as data:
        keys = [k for k in data.files if not k.startswith("output")]
        case = keys[0].split("__")[1] if "__" in keys[0] else None
        given = {k.split("__")[0]: data[k] for k in keys if case is None or k.endswith(f"__{case}")}
    np.savez(tmp / "vm_inputs.npz", **given)
    return ["-i", str(tmp / "vm_inputs.npz")]


def _run(path: Path, device: str, tmp: Path) -> tuple[bool, str]:
    args = ["run", str(path), "--device", device, *_vm_inputs(path, tmp)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli_main(args)
        except SystemExit as exc:  # argparse
            code = int(exc.code or 0)
    return code == 0, err.getvalue().strip().splitlines()[0] if err.getvalue().strip() else ""


def disagreements(paths: list[Path], tmp: Path) -> list[str]:
    out = []
    for path in paths:
        says, problem, device = _inspect(path)
        if device == "opencl" and opencl_unusable():
            pytest.skip(str(opencl_unusable()))
        ran, error = _run(path, device, tmp)
        if says != ran:
            out.append(
                f"{path}: inspect says {'yes' if says else 'no'} ({problem}), run "
                f"{'ran' if ran else 'failed'} ({error})"
            )
    return out


@pytest.fixture(autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "agree-cache"))


def test_shared_artifacts(artifacts: Path, tmp_path: Path) -> None:
    root = Path(artifacts)  # the folder itself: every path under it as found, not redirected
    paths = candidates(root) if root.is_dir() else []
    if not paths:  # third-party data: a user's clone has none
        why = f"no artifacts in {Path(artifacts)}: set TVMRT_ARTIFACTS to the third-party artifacts folder"
        if os.environ.get("TVMRT_REQUIRE_ARTIFACTS"):
            pytest.fail(why)
        pytest.skip(why)
    assert len(paths) >= 60, len(paths)  # every folder and library of $TVMRT_ARTIFACTS
    assert disagreements(paths, tmp_path) == []


def test_field_builds(field_root: Path, tmp_path: Path) -> None:
    paths = candidates(field_root)
    assert len(paths) >= 6, paths
    assert disagreements(paths, tmp_path) == []
    tvmc, problem, _ = _inspect(field_root / "tvmc-aarch64" / "module.tar")
    assert not tvmc  # the nested mod.tar holds an aarch64 object, named as in the package
    assert problem.endswith(
        "module.tar:mod.tar:lib0.o': built for aarch64 (ARM 64-bit), this machine is x86-64"
    )
    host_only, problem, _ = _inspect(field_root / "opencl-host-o")
    assert not host_only
    assert "host part of a device build (OpenCL, CUDA, ...) without its device code" in problem
    pair = field_root / "tar-so-pair"  # deploy.tar + the deploy.tar.so TVM left: one library
    assert _inspect(pair)[0]
    model = load_artifact(find_artifact(pair))
    with np.load(pair / "golden.npz") as golden:
        model.executor.set_input("data", golden["data"])
        model.executor.run()
        assert model.executor.get_output(0).numpy().tobytes() == golden["output_0"].tobytes()
    assert model.files.lib.name == "deploy.tar"


def test_mlf_aot_and_neo_folders(tmp_path: Path) -> None:
    paths = candidates(fixture_root()) + candidates(built(DLR_SCRIPT, "dlr"))
    assert len(paths) >= 40, len(paths)
    assert disagreements(paths, tmp_path) == []


def test_an_android_library_is_named_and_refused(tmp_path: Path) -> None:
    compiler = shutil.which("aarch64-linux-gnu-gcc")
    if compiler is None:
        pytest.skip("aarch64-linux-gnu-gcc is not installed")
    source = tmp_path / "note.c"
    source.write_text(
        "#include <stdint.h>\n"
        "struct note { uint32_t namesz, descsz, type; char name[8]; uint32_t api; };\n"
        '__attribute__((section(".note.android.ident"), aligned(4), used))\n'
        'static const struct note ident = {8, 4, 1, "Android", 24};\n'
        "int __tvm_main__(void) { return 0; }\n"
    )
    lib = tmp_path / "libmodel_android.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
    says, problem, _ = _inspect(lib)
    assert not says
    assert "Android (bionic libc): an Android app's library, not a Linux one" in problem
    assert disagreements([lib], tmp_path) == []


@pytest.mark.parametrize(
    ("driver", "gpus", "sm"),
    [("missing", 0, 0), ("stand-in", 0, 75), ("stand-in", 1, 75), ("stand-in", 1, 70)],
)
def test_cuda_fixtures(
    driver: str, gpus: int, sm: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CUDA fixtures (scripts/make_cuda_fixtures.py), with no NVIDIA driver, with the
    recording stand-in (tests/support/fake_libcuda.c) showing no GPU, an sm_75 GPU, and an
    sm_70 GPU their PTX (for sm_75) is too new for: inspect says "runs here" exactly when
    ``tvmrt run --device cuda`` runs."""
    from support.fake_cuda import FakeLog, build
    from tvmrt.runtime.backends import _cuda_driver

    device_table = importlib.import_module("tvmrt.runtime.device")

    paths = sorted(p for p in cuda_fixtures().glob("*.so"))
    lib = tmp_path / "no-driver" / "libcuda.so.1"
    if driver == "stand-in":
        lib = build(tmp_path)
        FakeLog(lib).config(count=gpus, sm=sm)
    monkeypatch.setenv(_cuda_driver.LIBRARY_ENV, str(lib))
    monkeypatch.setattr(_cuda_driver, "_driver", [])
    cuda = int(device_table.DLDeviceType.kDLCUDA)
    device_table.unregister_device_api(cuda)
    device_table._lazy[cuda] = "tvmrt.runtime.backends.cuda:backend"
    try:
        said = [_inspect(path)[0] for path in paths]
        assert disagreements(paths, tmp_path) == []
    finally:
        device_table.unregister_device_api(cuda)
        device_table._lazy[cuda] = "tvmrt.runtime.backends.cuda:backend"
    graphs = [path.name for path, yes in zip(paths, said, strict=True) if yes]
    if driver == "stand-in" and gpus and sm == 75:
        assert "relay019_ptx.so" in graphs  # a graph factory whose PTX this GPU JITs
    else:
        assert graphs == []
