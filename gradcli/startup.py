"""Start-up: imports made with the cycle collector held off, shared by the package face (the library's
first use) and ``gradcli eval``'s fast path (which never touches the face's names)."""

from __future__ import annotations

import gc
from collections.abc import Callable


def unscanned(load: Callable[[], object]) -> object:
    """``load()`` (imports) with no cycle collection while it runs (nothing to free), then what it
    allocated moved to the oldest generation unscanned.

    Freeze then unfreeze: the objects go to the oldest generation instead of being scanned all at
    once by the first collection after this, about 10 ms of a plain ``gradcli eval``. The importing
    program's own objects go there too (its cyclic garbage then waits for the next full collection,
    as any object that outlives two collections does). A program that froze objects itself (before
    forking, say) keeps them frozen, and one that turned the collector off keeps it off: both are
    left alone.
    """
    if not gc.isenabled():
        return load()
    gc.disable()
    try:
        return load()
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        gc.enable()
