"""Issue 33 item 1: MLF AOT packages (microTVM's export) run on the host, bitwise as TVM.

Each fixture (float32 and int8; ``c`` interface with the unpacked API and ``packed``
interface; params linked and not; tar and unpacked folder) is TVM 0.16's own
``export_model_library_format`` of a ``target="c"`` CRT AOT build; the goldens are the
same Relay module and params run by TVM's host-driven AOT (``tvm.runtime.executor.
AotModule`` over the C++ runtime), see tests/mlf_aot/build_mlf_aot_fixtures.py. tvmrt compiles
the package's C code for this host with its CRT platform and runs it through TVM's AOT
face and the ``tvmrt`` verbs.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.mlf_aot_cases import CASES, golden, package_path, same_bits
from tvmrt.artifact import find_artifact, inspect_artifact, load_artifact
from tvmrt.runtime.executor import AotModule

FORMS = ("tar", "folder")


@pytest.mark.parametrize("packed_as", FORMS)
@pytest.mark.parametrize("case", CASES)
def test_python_aot_face_is_bitwise_tvm(mlf_root: Path, case: str, packed_as: str) -> None:
    inputs, want = golden(mlf_root, case)
    model = load_artifact(find_artifact(package_path(mlf_root, case, packed_as)))
    face = model.executor
    assert isinstance(face, AotModule)
    assert model.form == "mlf_aot"
    assert [t.name for t in face.inputs] == list(inputs)
    face.set_input(**inputs)
    face.run()
    assert face.get_num_outputs() == len(want)
    for i, expected in enumerate(want):
        got = face.get_output(i).numpy()
        assert same_bits(got, expected), (case, i, got.ravel()[:5], expected.ravel()[:5])
        # the packed build carries its C metadata, and the float package's Relay source is
        # typed (main's return type): their output shapes are TVM's; the untyped int8 c
        # build's come back flat, as nothing in it records them
        if "_packed_" in case or case.startswith("float"):
            assert got.shape == expected.shape, (case, i)
        else:
            assert got.shape == (expected.size,), (case, i)


@pytest.mark.parametrize("packed_as", FORMS)
@pytest.mark.parametrize("case", CASES)
def test_tvmrt_run_is_bitwise_tvm(
    mlf_root: Path, case: str, packed_as: str, tmp_path: Path
) -> None:
    inputs, want = golden(mlf_root, case)
    np.savez(tmp_path / "in.npz", **inputs)
    path = package_path(mlf_root, case, packed_as)
    done = tvmrt("run", path, "-i", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert done.returncode == 0, done.stderr
    got = np.load(tmp_path / "out.npz")
    assert len(got.files) == len(want)
    for name, expected in zip(got.files, want, strict=True):
        assert same_bits(got[name], expected), (case, name)
        if "_packed_" in case or case.startswith("float"):  # as the face's (above)
            assert got[name].shape == expected.shape, (case, name)


def test_inspect_reports_the_package(mlf_root: Path) -> None:
    c_tar = inspect_artifact(find_artifact(package_path(mlf_root, "float_c_linked", "tar")))
    report = c_tar.to_dict()
    assert report["runnable"], report["problems"]
    assert report["form"] == "mlf_aot"
    library = report["library"]
    assert library["mlf"] == {
        "version": 7,
        "model": "float_net",
        "executors": ["aot"],
        "targets": ["c -keys=cpu "],
    }
    facts = library["mlf_aot"]
    assert facts["interface_api"].startswith("c (unpacked")
    assert facts["entry"] == "tvmgen_float_net_run"
    assert facts["memory_pools"] == ["global_const_workspace"]
    metadata = json.loads(
        (package_path(mlf_root, "float_c_linked", "folder") / "metadata.json").read_text()
    )
    main = metadata["modules"]["float_net"]["memory"]["functions"]["main"][0]
    assert facts["workspace_bytes"] == main["workspace_size_bytes"] > 0
    assert facts["constants_bytes"] == main["constants_size_bytes"]
    assert [t["name"] for t in facts["outputs"]] == ["output0", "output1"]
    assert facts["inputs"][0]["shape"] == [1, 3, 10, 10]
    packed = inspect_artifact(
        find_artifact(package_path(mlf_root, "int8_packed_separate", "folder"))
    )
    facts = packed.to_dict()["library"]["mlf_aot"]
    assert facts["interface_api"].startswith("packed")
    assert facts["memory_pools"] == []  # built without USMP: heap workspace
    assert facts["workspace_from"] == "TVMBackendAllocWorkspace (the heap)"
    assert facts["outputs"][0]["shape"] == [1, 8]


def test_inspect_text_and_every_verb(mlf_root: Path, tmp_path: Path) -> None:
    path = package_path(mlf_root, "int8_packed_linked", "folder")
    shown = tvmrt("inspect", path)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert "MLF:    version 7, model 'int8_net', executor aot" in shown.stdout
    assert "interface_api: packed" in shown.stdout
    assert "runs here (" in shown.stdout
    assert ": yes" in shown.stdout
    bench = tvmrt("bench", path, "--number", "2", "--repeat", "2")
    assert bench.returncode == 0, bench.stderr
    profile = tvmrt("profile", path, "--number", "1", "--repeat", "1")
    assert profile.returncode == 0, profile.stderr
    assert "tvmgen_int8_net___tvm_main__" in profile.stdout


def test_replicas_share_the_library_and_agree(mlf_root: Path) -> None:
    inputs, want = golden(mlf_root, "float_c_linked")  # static pools: runs take turns
    model = load_artifact(find_artifact(package_path(mlf_root, "float_c_linked", "tar")))
    faces = [model.executor, *model.executor.replicate(3)]
    results: dict[int, list[bytes]] = {}

    def work(i: int) -> None:
        face = faces[i]
        outs = []
        for _ in range(20):
            face.set_input(**inputs)
            face.run()
            outs.append(face.get_output(0).numpy().tobytes())
        results[i] = outs

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(faces))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(o == want[0].tobytes() for outs in results.values() for o in outs)


def test_an_unpacked_package_loads_through_load_module_as_its_tar_does(
    mlf_root: Path, tmp_path: Path
) -> None:
    # runtime.load_module(FOLDER) said "is a folder, not a file"; TVM users load the tar
    from tvmrt import runtime

    inputs, want = golden(mlf_root, "float_c_linked")
    for form in FORMS:
        factory = runtime.load_module(str(package_path(mlf_root, "float_c_linked", form)))
        module = AotModule(factory["default"](runtime.cpu()))
        module.set_input(**inputs)
        module.run()
        for i, expected in enumerate(want):
            got = module.get_output(i).numpy()
            assert got.shape == expected.shape
            assert same_bits(got, expected), (form, i)
    with pytest.raises(FileNotFoundError, match=r"loads with tvmrt\.artifact\.load_artifact"):
        runtime.load_module(str(tmp_path))
