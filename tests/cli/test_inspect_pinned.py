"""``tvmrt inspect`` output pinned byte for byte, ``--json`` and text, for real artifacts.

The report is a typed object whose serialization is what ``--json`` prints; these files
hold what it printed before it was typed, so a change of key, order or wording shows here.
Paths are written as ``<artifacts>`` and ``<repo>``. Regenerate a file only for an
intended change of the output: ``TVMRT_PIN_INSPECT=1 pytest tests/cli/test_inspect_pinned.py``.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest

from support.fixtures import BUILT, artifact_folder
from support.paths import REPO
from tvmrt.cli import main
from tvmrt.runtime.loaders import link

PINNED = Path(__file__).parent / "inspect_pinned"

# case -> the arguments after `tvmrt inspect`, relative to <artifacts> unless they start
# with <repo>
CASES = {
    "digits-folder": ["<repo>/examples/digits/model"],
    "digits-standalone": ["<repo>/examples/digits/model/standalone.so"],
    "mobilenet-folder": ["mobilenet_v1"],
    "contrib-sort": ["contrib/sort-topk/deploy.so"],
    "tvmc-package": ["relay016/tvmc-package/module.tar"],
    "mlf-llvm": ["relay016/mlf-graph/model_llvm.tar"],
    "mlf-c": ["relay016/mlf-graph/model_c_crt.tar"],
    "hetero-opencl": ["relay016/hetero-opencl-cpu/deploy.so"],
    "systemlib-devc-tar": ["relay016/systemlib-seed-flow/deploy_devc_c.tar"],
    "systemlib-tar": ["relay016/systemlib-seed-flow/deploy.tar"],
    "systemlib-so": ["relay016/systemlib-so/deploy.so"],
    "linkparams-so": ["relay016/linkparams-so/deploy.so"],
    "aot-so": ["relay016/aot-so/deploy.so"],
    "relay-vm-folder": ["relayvm/cnn-static"],
    "relay-vm-so": ["relayvm/tuple-io/vm.so"],
    "windows-dll": ["windows-dll"],
    "aarch64-so": ["aarch64/deploy_lib.so"],
    "not-a-module": ["--lib", "<repo>/README.md"],
}

pytestmark = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64"),
    reason="pinned on x86-64 Linux: the report names the host and checks against it",
)


def _args(case: list[str], artifacts: Path) -> list[str]:
    return [
        a.replace("<repo>", str(REPO)) if a.startswith(("<repo>", "-")) else str(artifacts / a)
        for a in case
    ]


def _inspect(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["inspect", *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("case", sorted(CASES))
def test_inspect_output_is_pinned(
    case: str, artifacts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if link.find_compiler() is None or link.find_cxx_compiler() is None:
        pytest.skip("the pinned reports were made where C and C++ compilers are found")
    args = _args(CASES[case], artifacts)
    for flags, suffix in (([], "txt"), (["--json"], "json")):
        code, out = _inspect([*args, *flags], capsys)
        text = out
        for name in BUILT:  # the project's own builds stand where $TVMRT_ARTIFACTS had them
            if f"/{name}/" in text:
                text = text.replace(str(artifact_folder(name).parent), "<artifacts>")
        text = text.replace(str(artifacts), "<artifacts>").replace(str(REPO), "<repo>")
        shown = f"exit {code}\n{text}"
        pinned = PINNED / f"{case}.{suffix}"
        if os.environ.get("TVMRT_PIN_INSPECT"):
            pinned.write_text(shown)
        assert shown == pinned.read_text(), f"tvmrt inspect output changed: {pinned.name}"
