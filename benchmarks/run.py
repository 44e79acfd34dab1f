"""gradcli's benchmark suite: ratios against references measured in the same run.

    python benchmarks/run.py            # everything
    python benchmarks/run.py scalar     # only the benchmarks whose name contains "scalar"
    python benchmarks/run.py --quick    # fewer repeats (a smoke test)

Every library is pinned to one thread (this shared 2-core machine stalls thread
pools and drifts 1.5-1.8x between runs minutes apart, so only ratios measured
side by side mean anything). Each case runs its contenders interleaved, several
rounds, and reports medians. PyTorch (and JAX) are used when installed; without
them the suite says so and still runs the NumPy references.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "XLA_FLAGS"):
    os.environ[_var] = (
        "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if _var == "XLA_FLAGS" else "1"
    )

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cases  # noqa: E402


@dataclass
class Result:
    case: str
    reference: str
    target: str
    seconds: dict[str, float] = field(default_factory=dict)  # medians
    fastest: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def ratio(self, name: str) -> float:
        return self.seconds[name] / self.seconds[self.reference]


def warm_memory(nbytes: int) -> None:
    """Touch and release ``nbytes``: on this VM the first touch of memory the host has
    reclaimed costs up to 10x a normal page fault, and lands on whichever contender
    happens to run after a large free. Warming before every timed call removes that
    order effect (the same for every contender)."""
    if nbytes:
        import numpy as np

        block = np.ones(nbytes // 8)
        del block


peaks: dict[str, list[float]] = {}  # peak memory (MB) of contenders that report it


def measure(contenders: dict[str, Callable[[], object]], rounds: int, warm: int) -> dict[str, list[float]]:
    """Wall times of each contender, run interleaved ``rounds`` times."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    peaks.clear()
    for _ in range(rounds):
        for name, fn in contenders.items():
            warm_memory(warm)
            start = time.perf_counter()
            outcome = fn()
            elapsed = time.perf_counter() - start
            if isinstance(outcome, cases.Timed):  # timed inside its own process
                elapsed = outcome.seconds
                peaks.setdefault(name, []).append(outcome.peak_mb)
            times[name].append(elapsed)
    return times


def run_case(case: cases.Case, rounds: int) -> Result:
    contenders, notes = case.setup()
    if case.rounds != 1:
        for fn in contenders.values():  # warm up (imports, caches, first-call costs)
            fn()
    result = Result(case.name, case.reference, case.target, notes=notes)
    times = measure(contenders, case.rounds or rounds, case.warm_bytes)
    result.seconds = {name: statistics.median(ts) for name, ts in times.items()}
    result.fastest = {name: min(ts) for name, ts in times.items()}
    if peaks:
        result.notes.append("peak memory: " + ", ".join(f"{n} {max(p):,.0f} MB" for n, p in peaks.items()))
    return result


def print_table(results: list[Result]) -> None:
    print(f"\n{'benchmark':40s} {'contender':28s} {'median':>11s} {'ratio':>7s} {'min':>11s} {'ratio':>7s}")
    print("-" * 108)
    for r in results:
        for i, (name, secs) in enumerate(sorted(r.seconds.items(), key=lambda kv: kv[1])):
            label = r.case if i == 0 else ""
            mark = "  (reference)" if name == r.reference else ""
            best = r.fastest[name] / r.fastest[r.reference]
            print(
                f"{label:40s} {name:28s} {secs * 1e3:9.2f}ms {r.ratio(name):6.2f}x "
                f"{r.fastest[name] * 1e3:9.2f}ms {best:6.2f}x{mark}"
            )
        print(f"{'':44s} target: {r.target}")
        for note in r.notes:
            print(f"{'':44s} note: {note}")
        print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="run benchmarks whose name contains any of these words")
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke test, not a measurement")
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args()
    rounds = 2 if args.quick else 7
    chosen = [c for c in cases.CASES if not args.only or any(w in c.name for w in args.only)]
    print(
        f"gradcli benchmarks, one thread per library; {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} cores; {cases.versions()}"
    )
    results = []
    for case in chosen:
        print(f"running {case.name} ...", flush=True)
        results.append(run_case(case, rounds))
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2))


if __name__ == "__main__":
    main()
