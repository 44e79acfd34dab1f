"""The full false-alarm sweep of issue 34: ``check`` on the first small float64 sample of every op of
PyTorch's OpInfo database that supports autograd, beside ``torch.autograd.gradcheck``; prints each op
whose verdict is not OK and the tally. The suite runs a fixed subset (tests/test_r34_verdicts.py; all
of it with GRADCLI_OPINFO_SWEEP=full).

    PYTHONPATH=. python benchmarks/opinfo_sweep.py [--json FILE]
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from opinfo_sweep import op_db, sweep_one  # noqa: E402


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    started = time.perf_counter()
    swept = [s for s in (sweep_one(op) for op in op_db()) if s is not None]
    for s in swept:
        if s.verdict != "OK" or s.gradcheck is False:
            print(f"{s.name:40} {s.verdict:13} gradcheck {s.gradcheck}  {s.line[:150]}")
    print(f"{len(swept)} samples ({len({s.name for s in swept})} ops) in {time.perf_counter() - started:.0f} s")
    print(dict(Counter((s.verdict, s.gradcheck) for s in swept)))
    false_alarms = [s.name for s in swept if s.gradcheck and s.verdict not in ("OK", "INCONCLUSIVE")]
    print(f"not OK or INCONCLUSIVE where gradcheck passes: {false_alarms}")
    if "--json" in argv:
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps([s.__dict__ for s in swept], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
