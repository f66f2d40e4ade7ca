"""Single-field damage to what ``ld.so`` trusts in a real library, each load in a child (issue 23).

Enumerates the program-header fields, dynamic entries, dynamic relocations and dynamic
symbols of a library, and for each field a few values (zero, bit flips, boundary and
large values). Each mutated file is loaded and its graph run in a forked child against
``golden.npz``; the outcome is one of

- ``refused``: a tvmrt error (the checks in ``src/tvmrt/binfmt/elf_load.py``);
- ``correct``: it loaded and answered as the golden output says;
- ``wrong``: it loaded and answered otherwise;
- ``death``: the child died (a signal, or ``ld.so``'s exit 127 on an assertion);
- ``hang``: no answer within the time limit;
- ``other``: a Python exception that is not a tvmrt error.

The rule: no deaths, hangs, wrong answers or other exceptions. ``tests/hostile/
test_elf_fuzz.py`` runs a fixed-seed sample in CI; for every mutation::

    PYTHONPATH=src .venv/bin/python fuzz/elf_fields.py linkparams --all
    PYTHONPATH=src .venv/bin/python fuzz/elf_fields.py mobilenet --count 2000 --seed 0
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import struct
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
MODELS = {  # name -> (library, graph json or None for an embedded factory, params)
    "linkparams": ("relay016/linkparams-so/deploy.so", None, None),
    "mobilenet": (
        "mobilenet_v1/deploy_lib.so",
        "mobilenet_v1/deploy_graph.json",
        "mobilenet_v1/deploy_param.params",
    ),
}
_EXIT = {0: "correct", 10: "refused", 11: "wrong", 12: "other"}


@dataclass(frozen=True)
class Field:
    """One field of the file: its name (``PT_LOAD[1].p_filesz``), byte offset and width."""

    name: str
    offset: int
    size: int


def fields(data: bytes) -> list[Field]:
    """Every program-header field, dynamic entry, dynamic relocation and dynamic symbol field."""
    from tvmrt.binfmt.binary import ElfFile

    elf = ElfFile(data, "fuzz")
    is64 = elf.info.bits == 64
    w = 8 if is64 else 4
    out: list[Field] = []
    phoff = struct.unpack_from("<Q" if is64 else "<I", data, 0x20 if is64 else 0x1C)[0]
    phnum = struct.unpack_from("<H", data, 0x38 if is64 else 0x2C)[0]
    names = {1: "PT_LOAD", 2: "PT_DYNAMIC", 4: "PT_NOTE", 7: "PT_TLS", 0x6474E552: "PT_GNU_RELRO"}
    if is64:
        layout = [("p_type", 0, 4), ("p_flags", 4, 4), ("p_offset", 8, 8), ("p_vaddr", 16, 8)]
        layout += [("p_filesz", 32, 8), ("p_memsz", 40, 8), ("p_align", 48, 8)]
    else:
        layout = [("p_type", 0, 4), ("p_offset", 4, 4), ("p_vaddr", 8, 4), ("p_filesz", 16, 4)]
        layout += [("p_memsz", 20, 4), ("p_flags", 24, 4), ("p_align", 28, 4)]
    seen: Counter[int] = Counter()
    for i in range(phnum):
        at = phoff + i * (56 if is64 else 32)
        ptype = struct.unpack_from("<I", data, at)[0]
        base = names.get(ptype, f"phdr[{i}]")
        name = f"{base}[{seen[ptype]}]" if ptype in (1, 4) else base
        seen[ptype] += 1
        out += [Field(f"{name}.{f}", at + off, n) for f, off, n in layout]
    for sec in elf.sections:
        if sec.type == 6:  # SHT_DYNAMIC
            for i in range(sec.size // (2 * w)):
                at = sec.offset + i * 2 * w
                tag = int.from_bytes(data[at : at + w], "little")
                out += [Field(f"dyn[{i}] (tag {tag:#x}).d_tag", at, w)]
                out += [Field(f"dyn[{i}] (tag {tag:#x}).d_val", at + w, w)]
                if tag == 0:
                    break
        elif sec.type in (4, 9):  # SHT_RELA, SHT_REL
            ent = (3 if sec.type == 4 else 2) * w
            for i in range(sec.size // ent):
                at = sec.offset + i * ent
                parts = ["r_offset", "r_info", "r_addend"][: ent // w]
                out += [Field(f"{sec.name}[{i}].{p}", at + k * w, w) for k, p in enumerate(parts)]
        elif sec.type == 11:  # SHT_DYNSYM
            if is64:
                layout = [("st_name", 0, 4), ("st_info", 4, 1), ("st_other", 5, 1)]
                layout += [("st_shndx", 6, 2), ("st_value", 8, 8), ("st_size", 16, 8)]
            else:
                layout = [("st_name", 0, 4), ("st_value", 4, 4), ("st_size", 8, 4)]
                layout += [("st_info", 12, 1), ("st_other", 13, 1), ("st_shndx", 14, 2)]
            for i in range(1, sec.size // (24 if is64 else 16)):
                at = sec.offset + i * (24 if is64 else 16)
                out += [Field(f"dynsym[{i}].{f}", at + off, n) for f, off, n in layout]
    return out


def values(value: int, size: int) -> list[int]:
    """The values tried for a field holding ``value``: zero, bit flips, boundaries, large."""
    bits = 8 * size
    mask = (1 << bits) - 1
    cands = [0, value ^ 1, value ^ 8, value ^ (1 << (bits - 1)), mask]
    if size >= 4:
        cands += [value ^ 0x1000, (value + 8) & mask, 1 << 31]
    if size == 8:
        cands.append(1 << 40)
    return list(dict.fromkeys(v for v in cands if v != value))


def mutations(data: bytes) -> list[tuple[str, int, int, int]]:
    """(field name, byte offset, width, new value) for every single-field mutation."""
    out = []
    for f in fields(data):
        value = int.from_bytes(data[f.offset : f.offset + f.size], "little")
        out += [(f.name, f.offset, f.size, v) for v in values(value, f.size)]
    return out


def apply(data: bytes, offset: int, size: int, value: int) -> bytes:
    """``data`` with the little-endian field at ``offset`` set to ``value``."""
    return data[:offset] + value.to_bytes(size, "little") + data[offset + size :]


class Runner:
    """Loads and runs one model from files, each attempt in a forked child of this process."""

    def __init__(self, model: str) -> None:
        import numpy as np

        lib, graph, params = MODELS[model]
        self.data = (ARTIFACTS / lib).read_bytes()
        self.graph = (ARTIFACTS / graph).read_text() if graph else None
        self.params = (ARTIFACTS / params).read_bytes() if params else None
        with np.load(ARTIFACTS / Path(lib).parent / "golden.npz") as golden:
            self.input, self.output = golden["data"], golden["output_0"]
        self.exact = graph is None  # relay016 compares bit for bit (tests/test_relay016.py)
        self.dir = Path(tempfile.mkdtemp(prefix="tvmrt-elf-fuzz-"))
        import tvmrt.contrib.graph_executor  # noqa: F401  (imported once, before forking)

    def _child(self, path: Path) -> int:
        import numpy as np

        from tvmrt.contrib.graph_executor import GraphModule, create
        from tvmrt.error import TVMError
        from tvmrt.runtime import cpu, load_module

        try:
            lib = load_module(str(path))
            if self.graph is None:
                m = GraphModule(lib["default"](cpu(0)))
            else:
                m = create(self.graph, lib, cpu(0))
                m.load_params(self.params)
            m.set_input("data", self.input)
            m.run()
            out = m.get_output(0).numpy()
        except TVMError:
            return 10
        except BaseException as exc:  # a bug: say which
            (self.dir / "other.txt").write_text(f"{type(exc).__name__}: {exc}"[:300])
            return 12
        if self.exact:
            ok = out.shape == self.output.shape and bool(np.array_equal(out, self.output))
        else:
            ok = out.shape == self.output.shape and bool(np.allclose(out, self.output, 1e-4, 1e-5))
        return 0 if ok else 11

    def attempt(self, data: bytes, timeout: float = 60.0) -> str:
        """The outcome of loading ``data`` and running the graph, in a child process."""
        path = self.dir / "deploy.so"
        path.write_bytes(data)
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 12
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # ld.so's messages
                code = self._child(path)
            finally:
                os._exit(code)
        deadline = time.monotonic() + timeout
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "hang"
            time.sleep(0.002)
        if os.WIFEXITED(status):
            outcome = _EXIT.get(os.WEXITSTATUS(status), "death")
            why = self.dir / "other.txt"
            if outcome == "other" and why.exists():
                outcome += f" ({why.read_text()})"
                why.unlink()
            return outcome
        return "death"


def run(model: str, count: int | None, seed: int, verbose: bool = False) -> dict[str, object]:
    """Try ``count`` mutations (all if None) of ``model``, sampled with ``seed``; the tally."""
    runner = Runner(model)
    base = runner.attempt(runner.data)
    if base != "correct":
        raise RuntimeError(f"the unmutated {model} library is {base}, not correct")
    todo = mutations(runner.data)
    if count is not None and count < len(todo):
        todo = random.Random(seed).sample(todo, count)
    tally: Counter[str] = Counter()
    bad: list[str] = []
    start = time.monotonic()
    for name, offset, size, value in todo:
        outcome = runner.attempt(apply(runner.data, offset, size, value))
        tally[outcome.split(" ", 1)[0]] += 1
        if outcome not in ("refused", "correct"):
            bad.append(f"{outcome}: {name} = {value:#x}")
        if verbose:
            print(f"{outcome:8} {name} = {value:#x}", flush=True)
    return {
        "model": model,
        "mutations": len(todo),
        "seconds": round(time.monotonic() - start, 1),
        **{k: tally[k] for k in ("refused", "correct", "wrong", "death", "hang", "other")},
        "failures": bad,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", choices=sorted(MODELS))
    parser.add_argument("--all", action="store_true", help="every mutation (else --count)")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    os.environ.setdefault("TVM_NUM_THREADS", "1")
    result = run(args.model, None if args.all else args.count, args.seed, args.verbose)
    for key, value in result.items():
        if key != "failures":
            print(f"{key:10} {value}")
    for line in result["failures"]:  # type: ignore[attr-defined]
        print(line)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
