"""Issue 18: ``--points`` shows rows done, rows per second and the time left on a terminal's stderr
(erased at the end), and nothing in a pipe."""

from __future__ import annotations

import subprocess
import sys

from terminal import gradcli_on_terminal


def test_progress_on_a_terminal_only(tmp_path, monkeypatch):
    source = tmp_path / "p.csv"
    source.write_text("x\n" + "0.5\n" * 20_000)
    out = tmp_path / "o.csv"
    monkeypatch.setenv("GRADCLI_PROGRESS_DELAY", "0")
    args = ["eval", "sin(x)*x", "--points", str(source), "--chunk-rows", "500", "-o", str(out)]
    code, shown, raw = gradcli_on_terminal(args, columns=100)
    assert code == 0
    assert "evaluating points: " in shown and " rows/s" in shown and " rows, " in shown, shown[-500:]
    wrote = f"wrote {out} (20,000 rows)\n"  # said after the file is in place, as every -o says it (issue 27)
    assert raw.endswith("\x1b[2K" + wrote) or raw.endswith("\x1b[?25h" + wrote)  # the progress line is erased
    assert out.read_text().count("\n") == 20_001
    piped = subprocess.run([sys.executable, "-m", "gradcli", *args], capture_output=True, text=True)
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "", wrote)
