"""Peak memory of the fuzz targets: every case must stay under 256 MB of RSS.

    python fuzz/rss.py                       # inspect, load_module, elf, archive: 60 s each
    python fuzz/rss.py --seconds 5 inspect   # one target, 5 s

Each target runs in a fresh process: first every hostile file of ``hostile.py`` (the
resource bombs of issue 11), then random mutations of its seeds (real artifacts; the
same edits as tests/test_fuzz.py: bit flips, set bytes, cuts, duplications) until the
time is up. The process's peak RSS (``ru_maxrss``: everything, the interpreter and
numpy included) is the figure; the case that raised it most is named. ``load_module``
stops where the loader would link or ``dlopen`` (fuzz_targets.load_module), so nothing
from the inputs runs. Exit status 1 if a target reaches the limit or raises anything
but a tvmrt error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LIMIT_MB = 256
DEFAULT_TARGETS = ("inspect", "load_module", "elf", "archive")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def mutate(rng: random.Random, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(0, 8)):
        if not data:
            break
        at = rng.randrange(len(data))
        action = rng.choice(("flip", "set", "cut", "dup"))
        if action == "flip":
            data[at] ^= 1 << rng.randrange(8)
        elif action == "set":
            data[at] = rng.choice((0, 1, 0x7F, 0x80, 0xFF))
        elif action == "cut":
            del data[at:]
        else:
            data[at:at] = data[at : at + rng.randint(1, 16)]
    return bytes(data)


def child(target: str, seconds: float) -> dict[str, object]:
    sys.path.insert(0, str(HERE))
    from fuzz_targets import TARGETS, TVMError
    from run import seeds

    import hostile

    func = TARGETS[target]
    cases = 0
    files = [
        (name, build())
        for name, build in hostile.HOSTILE.items()
        if target in ("inspect", "load_module", hostile.TARGET_OF[name])
    ]
    seed_list = seeds(target) or [b"\x00"]
    worst = ("(imports and inputs)", _peak_mb())
    start = time.perf_counter()

    def one(name: str, data: bytes) -> None:
        nonlocal cases, worst
        before = _peak_mb()
        with contextlib.suppress(TVMError):
            func(data)
        cases += 1
        after = _peak_mb()
        if after - before > 0.5 and after > worst[1]:
            worst = (name, after)

    baseline = _peak_mb()
    for name, data in files:
        one(name, data)
    rng = random.Random(0)
    while time.perf_counter() - start < seconds:
        index = rng.randrange(len(seed_list))
        one(f"mutation of seed {index}", mutate(rng, seed_list[index]))
    return {
        "target": target,
        "cases": cases,
        "seconds": round(time.perf_counter() - start, 1),
        "baseline_mb": round(baseline, 1),
        "peak_mb": round(_peak_mb(), 1),
        "worst_case": worst[0],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS))
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.seconds)))
        return 0
    failed = 0
    print(
        f"{'target':12s} {'cases':>8s} {'s':>6s} {'baseline MB':>12s} {'peak MB':>8s}  worst case"
    )
    for target in args.targets:
        result = subprocess.run(
            [sys.executable, __file__, "--child", target, "--seconds", str(args.seconds)],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            print(f"{target:12s} FAILED\n{result.stderr[-4000:]}")
            failed += 1
            continue
        r = json.loads(result.stdout.strip().splitlines()[-1])
        over = r["peak_mb"] >= LIMIT_MB
        failed += over
        print(
            f"{target:12s} {r['cases']:8d} {r['seconds']:6.1f} {r['baseline_mb']:12.1f} "
            f"{r['peak_mb']:8.1f}  {r['worst_case']}{'  OVER THE LIMIT' if over else ''}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
