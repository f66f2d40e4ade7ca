"""Coverage-guided fuzzing of tvmrt's parsers with atheris (long runs, outside the suite).

    pip install 'tvmrt[fuzz]'
    python fuzz/run.py graph_json -runs=200000          # or params, module_blob, elf, ...
    python fuzz/run.py all -max_total_time=60           # every target, 60 s each

Seeds come from real artifacts (../shared/artifacts) and small hand-made inputs. Only
tvmrt errors may escape a target; anything else is reported by atheris as a crash and
the input is saved as crash-<hash>. A summary line per target gives executions and
crashes. Memory is capped (-rss_limit_mb=2048) so a size field that drives an allocation
larger than the input shows up as a failure.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", HERE.parents[1] / "shared" / "artifacts"))


def seeds(target: str) -> list[bytes]:
    """Starting inputs for ``target``."""
    from tvmrt.runtime import save_param_dict
    from tvmrt.testing import graphs

    out: list[bytes] = []
    if target == "graph_json":
        out += [graphs.add_one(4).encode(), graphs.reshape_nop().encode()]
        out += [p.read_bytes() for p in ARTIFACTS.glob("*/*.json") if "summary" not in p.name]
    elif target == "params":
        import numpy as np

        out.append(bytes(save_param_dict({"x": np.ones(3, "float32"), "b": np.zeros(2, "int8")})))
        out += [p.read_bytes()[:65536] for p in ARTIFACTS.glob("*/*.params")]
    elif target == "module_blob":
        out.append(_iris_blob())
    elif target == "elf":
        out += [p.read_bytes() for p in ARTIFACTS.glob("*/*.so")]
    elif target == "archive":
        out += [p.read_bytes() for p in ARTIFACTS.glob("*/*.tar")]
    elif target in ("inspect", "load_module"):
        out += [p.read_bytes() for p in ARTIFACTS.glob("*/*.so")]
        out += [p.read_bytes() for p in ARTIFACTS.glob("*/*.tar")]
    elif target in ("vm_executable", "vm_operands"):
        out += [p.read_bytes() for p in ARTIFACTS.glob("relayvm/*/code*.ro")]
    elif target == "stream":
        out.append(b"\x02" + b"\x00" * 7 + b"\x01" + b"\x00" * 7 + b"a")
    return [s for s in out if s]


def _iris_blob() -> bytes:
    import tarfile

    from tvmrt.binfmt import binary

    path = ARTIFACTS / "iris-factory" / "deploy_lib.tar"
    if not path.exists():
        return b""
    with tarfile.open(path) as tar:
        member = tar.extractfile("devc.o")
        data = member.read() if member else b""
    elf = binary.ElfFile(data, "devc.o")
    symbol = next(s for s in elf.symbols(dynamic=False) if s.name == "__tvm_dev_mblob")
    return elf.read_symbol(symbol)


def fuzz_one(target: str, argv: list[str]) -> None:
    """Run atheris on one target in this process (atheris takes over sys.argv)."""
    import atheris

    with atheris.instrument_imports():
        from fuzz_targets import TARGETS, TVMError

    func = TARGETS[target]

    def test_one_input(data: bytes) -> None:
        with contextlib.suppress(TVMError):
            func(data)

    corpus = HERE / "corpus" / target
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(seeds(target)):
        (corpus / f"seed-{i}").write_bytes(seed)
    atheris.Setup(
        [sys.argv[0], str(corpus), "-rss_limit_mb=2048", "-timeout=10", *argv], test_one_input
    )
    atheris.Fuzz()


def main() -> int:
    """``run.py TARGET|all [libFuzzer flags]``."""
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    target, flags = sys.argv[1], sys.argv[2:]
    sys.path.insert(0, str(HERE))
    if target != "all":
        fuzz_one(target, flags)
        return 0
    from fuzz_targets import TARGETS

    failed = 0
    for name in TARGETS:
        print(f"== {name}", flush=True)
        status = subprocess.run([sys.executable, __file__, name, *flags]).returncode
        failed += status != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
