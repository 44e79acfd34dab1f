"""Will a Jacobian or a Hessian fit in memory? An estimate of the peak, checked before the work.

The element limit (``GRADCLI_MAX_ELEMENTS``) bounds one array; a Jacobian's work holds several
of its size at once, and its batched passes more. The figures below were measured with
``/usr/bin/time`` on ``gradcli jacobian`` and ``hessian`` (n = 2,000 and 4,000, forward and
reverse modes): the peak, less the interpreter's own, was 1.8 (Jacobian) and 2.7 (Hessian)
times the matrix for text output, and 7.7 and 10.5 times with ``--json`` (NumPy's ``tolist``
and the JSON text of every number). The estimate rounds these up, and adds the batched
passes of ``autograd/functional.py``: each holds its seed and a few gradients of
``batch x widest`` elements. At n = 14,000 (``jacobian "sin(x)*x"``, 4 batched passes) it
says 4.8 GB where the run peaked at 3.5 GB.
"""

from __future__ import annotations

import os

from .errors import UsageError

FLOAT = 8  # bytes of a float64
COPIES = {"jacobian": 2, "hessian": 3}  # the blocks and np.block's result (and, for a Hessian, the tangents)
JSON_COPIES = 7  # Python floats from tolist() (32 bytes each) and the JSON text (about 20 bytes a number)
PASS_TEMPORARIES = 4  # in one batched pass: the seed, the incoming and outgoing gradient, a rule's temporary
BASE = 100_000_000  # the interpreter, NumPy and the recorded graph
MEMINFO = "/proc/meminfo"
#: Largest batch of basis vectors autograd.functional sends through at once (bounds the memory of a pass).
MAX_BATCH_ELEMENTS = 50_000_000


def available_bytes() -> int | None:
    """Memory this process may still use: GRADCLI_MAX_MEMORY if set, else the machine's
    MemAvailable (Linux), else free physical pages (os.sysconf); the lower of that and a
    finite address-space limit (``ulimit -v``). None when nothing can be read."""
    text = os.environ.get("GRADCLI_MAX_MEMORY", "").strip()
    if text:
        return parse_size(text)
    found: int | None = None
    try:
        with open(MEMINFO, encoding="ascii") as info:
            for line in info:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (ValueError, OSError, AttributeError):
            found = None
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            found = soft if found is None else min(found, soft)
    except (ImportError, ValueError, OSError):
        pass
    return found


_UNITS = {"": 1, "B": 1, "K": 10**3, "KB": 10**3, "M": 10**6, "MB": 10**6, "G": 10**9, "GB": 10**9, "T": 10**12,
          "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}  # fmt: skip


def parse_size(text: str) -> int:
    """``GRADCLI_MAX_MEMORY``: bytes, or with a unit: ``8G``, ``512MB``, ``2GiB``."""
    number = text.rstrip("KMGTBikmgtb ")
    unit = text[len(number) :].strip().upper()
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in _UNITS or not number.replace(".", "", 1).isdigit() or not value > 0:
        raise UsageError(f"GRADCLI_MAX_MEMORY={text!r} is invalid: give a size such as 8G, 512M or 2000000000")
    return int(value * _UNITS[unit])


def estimate(kind: str, rows: int, columns: int, as_json: bool = False) -> int:
    """Peak bytes of computing (and printing) a ``rows x columns`` Jacobian or Hessian."""
    matrix = rows * columns * FLOAT
    copies = COPIES[kind] + (JSON_COPIES if as_json else 0)
    widest = max(rows, columns, 1)
    batch = max(1, MAX_BATCH_ELEMENTS // widest)  # basis vectors sent through in one pass
    one_pass = min(batch, max(rows, columns)) * widest * FLOAT * PASS_TEMPORARIES
    return BASE + copies * matrix + one_pass


def check_fits(kind: str, rows: int, columns: int, as_json: bool = False) -> None:
    """UsageError, before any work, when the estimate is over the memory available."""
    needed = estimate(kind, rows, columns, as_json)
    available = available_bytes()
    if available is None or needed <= available:
        return
    name = "Jacobian" if kind == "jacobian" else "Hessian"
    size = f"{rows:,} x {columns:,} ({rows * columns:,} elements, {rows * columns * FLOAT / 1e9:.3g} GB of float64)"
    raise UsageError(
        f"the {name} is {size}: computing it{' as JSON' if as_json else ''} needs about {needed / 1e9:.3g} GB "
        f"of memory, more than {room(available)}; differentiate by fewer elements (--wrt), free memory, "
        "or set GRADCLI_MAX_MEMORY (e.g. 64G) to raise the limit"
    )


def room(available: int) -> str:
    """The memory a refusal names: ``GRADCLI_MAX_MEMORY (4 GB)`` or ``the 23 GB this machine has available``."""
    if os.environ.get("GRADCLI_MAX_MEMORY", "").strip():
        return f"GRADCLI_MAX_MEMORY ({available / 1e9:.3g} GB)"
    return f"the {available / 1e9:.3g} GB this machine has available"


DEFAULT_MAX_ELEMENTS = 200_000_000


def max_elements() -> int:
    """The largest array gradcli will make: GRADCLI_MAX_ELEMENTS, or 2e8 (1.6 GB of float64)."""
    text = os.environ.get("GRADCLI_MAX_ELEMENTS", "").strip()
    if not text:
        return DEFAULT_MAX_ELEMENTS
    # ASCII digits only: str.isdigit() also takes '²' and '٣', which int() then refuses or misreads
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise UsageError(
            f"GRADCLI_MAX_ELEMENTS={text!r} is invalid: give a whole number of elements >= 1 "
            f"(digits only, e.g. {DEFAULT_MAX_ELEMENTS}), or unset it for the default"
        )
    return int(text)


def limit_size(shape: tuple[int, ...], what: str, limit: int | None = None) -> None:
    """UsageError if an array of ``shape`` would be over the limit: said before it is allocated."""
    count = 1
    for n in shape:
        count *= int(n)
    if limit is None:
        limit = max_elements()
    if count > limit:
        raise UsageError(
            f"{what} would have shape {tuple(shape)}: {count:,} elements ({count * 8 / 1e9:.3g} GB of float64), "
            f"more than the limit of {limit:,} (set GRADCLI_MAX_ELEMENTS to raise it)"
        )
