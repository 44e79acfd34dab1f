"""Issue 13: a Jacobian or Hessian that would not fit in memory is refused before the work."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gradcli import memory
from gradcli.cli.app import app
from gradcli.errors import UsageError

runner = CliRunner()
# The process's own peak: VmHWM (ru_maxrss would carry over pytest's own peak across fork and exec).
PEAK = (
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1]) * 1024\n"
)
POINT = "x=[" + ",".join(str(i % 10) for i in range(14_000)) + "]"


@pytest.mark.parametrize(
    ("command", "name", "needed"), [("jacobian", "Jacobian", "4.84"), ("hessian", "Hessian", "6.4")]
)
def test_a_matrix_over_the_memory_is_refused_up_front(monkeypatch, command, name, needed):
    from gradcli.autograd import functional

    def never(*args, **kwargs):
        raise AssertionError("the work started")

    monkeypatch.setattr(functional, "jacobian_blocks", never)
    monkeypatch.setattr(functional, "hessian_blocks", never)
    monkeypatch.setenv("GRADCLI_MAX_MEMORY", "4G")
    expression = "sin(x)*x" if command == "jacobian" else "sum(sin(x))"
    result = runner.invoke(app, [command, expression, "--at", POINT])
    assert result.exit_code == 2
    assert result.stderr == (
        f"error: the {name} is 14,000 x 14,000 (196,000,000 elements, 1.57 GB of float64): computing it needs about "
        f"{needed} GB of memory, more than GRADCLI_MAX_MEMORY (4 GB); differentiate by fewer elements (--wrt), "
        "free memory, or set GRADCLI_MAX_MEMORY (e.g. 64G) to raise the limit\n"
    )


def test_json_output_is_counted(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADCLI_MAX_MEMORY", "1G")
    point = "x=[" + ",".join("1" for _ in range(4_000)) + "]"
    # the matrix itself fits (written as .npy: its 16 million numbers as text would take half a minute)
    assert runner.invoke(app, ["jacobian", "sin(x)", "--at", point, "-o", str(tmp_path / "j.npy")]).exit_code == 0
    result = runner.invoke(app, ["jacobian", "sin(x)", "--at", point, "--json"])
    assert result.exit_code == 2 and "computing it as JSON needs about 1.76 GB" in result.stderr


def test_the_machine_s_available_memory_is_read(monkeypatch, tmp_path):
    monkeypatch.delenv("GRADCLI_MAX_MEMORY", raising=False)
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24683656 kB\nMemFree:  100 kB\nMemAvailable:    2000000 kB\n")
    monkeypatch.setattr(memory, "MEMINFO", str(info))
    assert memory.available_bytes() == 2_048_000_000
    with pytest.raises(UsageError, match=r"more than the 2\.05 GB this machine has available"):
        memory.check_fits("jacobian", 14_000, 14_000)
    memory.check_fits("jacobian", 1_000, 1_000)  # 0.1 GB: fits


def test_without_meminfo_the_free_pages_are_used(monkeypatch, tmp_path):
    monkeypatch.delenv("GRADCLI_MAX_MEMORY", raising=False)
    monkeypatch.setattr(memory, "MEMINFO", str(tmp_path / "none"))
    sizes = {"SC_AVPHYS_PAGES": 1000, "SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(memory.os, "sysconf", lambda name: sizes[name])
    assert memory.available_bytes() == 4_096_000


@pytest.mark.parametrize(("text", "size"), [("8G", 8 * 10**9), ("512M", 512 * 10**6), ("2GiB", 2**31), ("1000", 1000),
                                            ("1.5g", 1_500_000_000)])  # fmt: skip
def test_memory_sizes_are_read(text, size):
    assert memory.parse_size(text) == size


@pytest.mark.parametrize("text", ["-1G", "0", "lots", "1e9", "8X", "G"])
def test_a_malformed_memory_size_is_refused(text):
    with pytest.raises(UsageError, match=r"GRADCLI_MAX_MEMORY=.* is invalid"):
        memory.parse_size(text)


@pytest.mark.parametrize(("command", "expression", "mode"), [("jacobian", "sin(x)*x + exp(x)", "reverse"),
                                                            ("jacobian", "sum(x)*x", "forward"),
                                                            ("hessian", "sum(sin(x))*sum(x)", None)])  # fmt: skip
def test_the_estimate_is_above_the_real_peak(command, expression, mode):
    """The estimate against the process's own peak (VmHWM), at a size where it shows."""
    n = 2_500
    code = (
        PEAK
        + "from gradcli.lang.program import load\nfrom gradcli.lang.compute import program_jacobian, program_hessian\n"
        f"values = {{'x': [float(i % 7) / 7 for i in range({n})]}}\n"
        "import numpy as np\nvalues = {k: np.array(v) for k, v in values.items()}\n"
        f"program = load({expression!r})\n"
        + (f"program_jacobian(program, values, None, {mode!r})\n" if command == "jacobian" else
           "program_hessian(program, values, None)\n")
        + "print(_peak())\n"
    )  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    peak = int(done.stdout.split()[-1])
    estimate = memory.estimate(command, n, n)
    assert peak < estimate < 4 * peak + memory.BASE
