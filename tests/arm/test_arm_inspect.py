"""``tvmrt inspect`` says "runs here" for this machine's ARM builds and refuses the others.

On an ARM machine (``make test-arm``) the artifact built for it runs here, and the x86-64
and the other ARM build are refused naming both architectures; on x86-64 both ARM builds
are refused. Exit status 0 means "runs here", 1 "cannot run here".
"""

from __future__ import annotations

import platform

import pytest

from support.cli import tvmrt

pytestmark = pytest.mark.arm

_ARCHES = {"aarch64": "aarch64", "arm64": "aarch64", "armv7l": "armv7hf", "armv8l": "armv7hf"}
ARCH = _ARCHES.get(platform.machine().lower())
HOST = {"aarch64": "aarch64 (ARM 64-bit)", "armv7hf": "arm (ARM 32-bit)", None: "x86-64"}[ARCH]
BUILT = {"aarch64": "aarch64 (ARM 64-bit)", "armv7hf": "arm (ARM 32-bit)"}


@pytest.mark.parametrize("arch", ["aarch64", "armv7hf"])
def test_cross_artifact(artifacts, arch):
    result = tvmrt("inspect", artifacts / "cross" / arch / "deploy.so")
    machine = HOST.split(" ")[0]
    if arch == ARCH:
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"runs here ({machine}, linux): yes" in result.stdout
    else:
        assert result.returncode == 1, result.stdout + result.stderr
        assert f"cannot run here ({machine}, linux):" in result.stdout
        assert f"built for {BUILT[arch]}, this machine is {HOST}" in result.stdout


@pytest.mark.skipif(ARCH is None, reason="checks an ARM machine's refusal of x86-64 code")
def test_x86_artifact_refused_on_arm(artifacts):
    result = tvmrt("inspect", artifacts / "mobilenet_v1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"built for x86-64, this machine is {HOST}" in result.stdout
