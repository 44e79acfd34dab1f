"""Why two measurements of the same start-up disagree (issue 21): one run, interleaved, medians.

    python benchmarks/startup_modes.py               # 21 rounds
    python benchmarks/startup_modes.py --rounds 41 --baseline main

Every row starts ``gradcli eval "(x+w)*(w+1)" --at x=2,w=1`` (output to a pipe) or its reference
``python -c "import numpy"`` as a new process, and each row's ratio is to that reference run by
the same venv's python, in the same round:

- regular install: ``pip install .`` into a fresh venv (bytecode compiled by pip), as users get it;
- editable install (``pip install -e .``, this interpreter's venv): a finder hook imported at
  every start; with PYTHONDONTWRITEBYTECODE set (as on this machine) and no ``__pycache__``
  in the checkout, every module of gradcli is compiled again at every start (the row "sources
  without bytecode": a copy of the sources on PYTHONPATH, NumPy's bytecode as installed);
- ``--baseline REV``: the same regular install of another revision (git archive), to compare;
- blocks: the same two commands, 21 runs of one then 21 of the other, instead of alternating:
  the machine's drift between the blocks lands in the ratio.

``--commands`` times the commands issue 36 sets targets for, as ratios to ``eval`` in the same round
(this interpreter, ``python -m gradcli`` on this checkout's sources; no install): ``check`` of a
small expression within 2x, ``diff`` within 3x, ``--version`` and ``help`` within 0.8x.
``--only WORD`` (repeatable) keeps the commands whose name contains a word, and eval, the reference:

    python benchmarks/startup_modes.py --commands --only version --only help

Every library is pinned to one thread, as in benchmarks/run.py.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"  # one thread per library, as benchmarks/run.py: the children inherit it

import argparse  # noqa: E402
import compileall  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import EVAL, ROOT, installed  # noqa: E402


def timed(command: list[str], env: dict[str, str] | None = None, cwd: str | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.PIPE, check=True, env=env, cwd=cwd)
    return time.perf_counter() - start


def report(title: str, times: dict[str, list[float]], reference: dict[str, str]) -> None:
    print(f"\n{title}")
    print(f"{'':52s} {'median':>9s} {'ratio':>6s} {'min':>9s} {'ratio':>6s}")
    for name, ts in times.items():
        ref = times[reference[name]]
        print(
            f"{name:52s} {statistics.median(ts) * 1e3:7.1f}ms {statistics.median(ts) / statistics.median(ref):5.2f}x"
            f" {min(ts) * 1e3:7.1f}ms {min(ts) / min(ref):5.2f}x"
        )


def baseline_checkout(revision: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="gradcli-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def scalar_variants(rounds: int) -> None:
    """The 1e5-node scalar graph (worker.py), each run in a process of its own: warm-up or not,
    the cycle collector on or off, torch imported into gradcli's process or not."""
    import json

    venv = installed()
    script = str(Path(__file__).resolve().parent / "worker.py")
    variants = {
        "torch eager, warmed up": (sys.executable, "torch", {}),
        "torch eager, cold": (sys.executable, "torch", {"BENCH_WARM": "0"}),
        "torch eager, gc off": (sys.executable, "torch", {"BENCH_GC": "off"}),
        "gradcli (regular install), warmed up": (str(venv / "bin" / "python"), "gradcli", {}),
        "gradcli, cold": (str(venv / "bin" / "python"), "gradcli", {"BENCH_WARM": "0"}),
        "gradcli, gc off": (str(venv / "bin" / "python"), "gradcli", {"BENCH_GC": "off"}),
        "gradcli, editable install": (sys.executable, "gradcli", {}),
        "gradcli, torch imported in its process": (sys.executable, "gradcli", {"BENCH_WITH_TORCH": "1"}),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(min(rounds, 5)):
        for name, (python, library, extra) in variants.items():
            out = subprocess.run(
                [python, script, "scalar_graph", library], capture_output=True, text=True, check=True,
                env=dict(os.environ, **extra),
            ).stdout  # fmt: skip
            times[name].append(json.loads(out)["seconds"])
    report(
        "scalar graph, 1e5 nodes, build + backward (interleaved)", times, dict.fromkeys(times, "torch eager, warmed up")
    )


#: issue 36's commands (``--commands``): name -> gradcli's arguments
COMMANDS = {
    "eval": EVAL,
    "check x^2": ["check", "x^2", "--at", "x=1"],
    "diff x^2": ["diff", "x^2"],
    "diff sin(x)": ["diff", "sin(x)"],
    "diff x^2*sin(x) (SymPy's road)": ["diff", "x^2*sin(x)"],
    "--version": ["--version"],
    "help eval": ["help", "eval"],
    "eval --help": ["eval", "--help"],
}


def command_ratios(rounds: int, sources: list[Path], only: list[str] | None = None) -> None:
    """Each of ``COMMANDS`` as a new process, interleaved round by round, as ratios to eval's median in
    the same checkout (``sources``: the checkouts whose gradcli runs, all in the same rounds; ``only``:
    words, the commands whose name contains one, and eval)."""
    chosen = {n: a for n, a in COMMANDS.items() if n == "eval" or not only or any(w in n for w in only)}
    runs = {}
    away = tempfile.mkdtemp(prefix="gradcli-startup-")  # the working folder: python -m puts it first on sys.path
    for source in sources:
        label = f"{source.name}: " if len(sources) > 1 else ""
        for name, arguments in chosen.items():
            runs[f"{label}{name}"] = (
                [sys.executable, "-m", "gradcli", *arguments],
                dict(os.environ, PYTHONPATH=str(source)),
            )
    for source in sources:  # bytecode, as an install has it (with PYTHONDONTWRITEBYTECODE set no run writes it)
        compileall.compile_dir(str(source / "gradcli"), quiet=1)
    for command, env in runs.values():  # warm the page cache
        timed(command, env, away)
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (command, env) in runs.items():
            times[name].append(timed(command, env, away))
    reference = {name: name.rpartition(": ")[0] + (": " if ": " in name else "") + "eval" for name in runs}
    report(f"python -m gradcli, interleaved, {rounds} rounds", times, reference)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--baseline", help="also a regular install of this git revision (e.g. main)")
    parser.add_argument("--scalar", action="store_true", help="the scalar graph's variants instead (5 rounds)")
    parser.add_argument("--commands", action="store_true", help="issue 36's commands as ratios to eval")
    parser.add_argument(
        "--source", type=Path, action="append", help="with --commands: a checkout to run (repeatable; default this one)"
    )
    parser.add_argument("--only", action="append", help="with --commands: only the commands whose name has this word")
    args = parser.parse_args()
    if args.scalar:
        return scalar_variants(args.rounds)
    if args.commands:
        return command_ratios(args.rounds, args.source or [ROOT], args.only)

    venv = installed()
    regular_python, regular = str(venv / "bin" / "python"), str(venv / "bin" / "gradcli")
    editable = shutil.which("gradcli", path=str(Path(sys.executable).parent))
    commands: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "numpy (regular venv's python)": ([regular_python, "-c", "import numpy"], None),
        "gradcli eval, regular install": ([regular, *EVAL], None),
    }
    reference = dict.fromkeys(commands, "numpy (regular venv's python)")
    if args.baseline:
        old = installed(baseline_checkout(args.baseline))
        commands[f"gradcli eval, regular install of {args.baseline}"] = ([str(old / "bin" / "gradcli"), *EVAL], None)
        reference[f"gradcli eval, regular install of {args.baseline}"] = "numpy (regular venv's python)"
    if editable and Path(editable).exists():
        source = Path(tempfile.mkdtemp(prefix="gradcli-nopyc-"))  # the sources alone: no __pycache__
        shutil.copytree(ROOT / "gradcli", source / "gradcli", ignore=shutil.ignore_patterns("__pycache__"))
        no_pyc = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=str(source))
        commands["numpy (editable venv's python)"] = ([sys.executable, "-c", "import numpy"], None)
        commands["gradcli eval, editable install"] = ([editable, *EVAL], None)
        commands["gradcli eval, sources without bytecode"] = ([sys.executable, "-m", "gradcli", *EVAL], no_pyc)
        for name in ("numpy (editable venv's python)", "gradcli eval, editable install", "gradcli eval, sources without bytecode"):  # fmt: skip
            reference[name] = "numpy (editable venv's python)"

    for command, env in commands.values():  # warm the page cache
        timed(command, env)
    interleaved: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, (command, env) in commands.items():
            interleaved[name].append(timed(command, env))
    report(f"interleaved, {args.rounds} rounds", interleaved, reference)

    pair = ["numpy (regular venv's python)", "gradcli eval, regular install"]
    blocks = {name: [timed(*commands[name]) for _ in range(args.rounds)] for name in pair}
    report(f"in blocks ({args.rounds} of one, then {args.rounds} of the other)", blocks, reference)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
