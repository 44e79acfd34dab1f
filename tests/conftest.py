"""Shared test settings.

Hypothesis runs derandomized by default so CI is reproducible; set
GRADCLI_HYPOTHESIS=explore to search new examples (and keep any failure found
as a regression test).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).parent))  # tests import their helpers (numdiff) directly

settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", deadline=None, max_examples=500, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("GRADCLI_HYPOTHESIS", "ci"))

# --doctest-modules imports every module under tests/ at collection, in each xdist worker: this helper has no
# doctests, and importing it runs its @torch.compile decorators (torch._dynamo's import, about 4 s a worker);
# the tests that need it import it themselves (test_r34_torch_road.py's fixture, the CLI's own copy)
collect_ignore = ["r34_torch_kinds.py"]


def pytest_configure(config) -> None:  # noqa: ANN001
    """Compile gradcli's modules to bytecode once, in the controller before the workers start: the
    suite starts gradcli as a new process about a thousand times (CLI, README and help tests), and
    where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) each start compiled every
    module it imports again from source, 0.15 s of a 0.2 s `check` (Python still reads bytecode
    that is there; the variable only stops it from writing). compileall skips modules already
    compiled and unchanged."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    compileall.compile_dir(str(Path(__file__).parent.parent / "gradcli"), quiet=2)
