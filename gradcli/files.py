"""Writing an output file so that it is either all there or not touched.

``-o FILE`` is written to a temporary file in the same folder, flushed to disk, then
renamed over ``FILE`` (a rename within a folder is atomic): a full disk, a missing
permission or an interruption leaves the old content whole and no temporary file
behind. A path that is not a regular file (``/dev/stdout``, a named pipe) cannot be
replaced and is written directly, and so is a writable file in a folder where no new
file can be made; a symbolic link is followed, and stays a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

from .errors import UsageError

# the system calls that put the bytes on disk (tests replace them to fill the disk at will)
_write = os.write
_fsync = os.fsync


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or raise a UsageError and keep the old file."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    target = Path(path)
    try:
        try:
            info = os.stat(target)  # follows a symbolic link: its target is what gets replaced
        except FileNotFoundError:
            info = None
        if info is not None and stat.S_ISDIR(info.st_mode):
            raise UsageError(f"cannot write {path}: it is a directory")
        if info is not None and not stat.S_ISREG(info.st_mode):  # a device or a pipe: no rename possible
            with open(target, "wb") as stream:
                stream.write(raw)
            return
        try:
            _replace(Path(os.path.realpath(target)), raw, info)
        except PermissionError:
            if info is None or not os.access(target, os.W_OK):
                raise
            # a file we may write in a folder we may not: written in place, as before (not atomic)
            with open(target, "wb") as stream:
                stream.write(raw)
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror or exc} (nothing was changed)") from None


def _replace(target: Path, raw: bytes, info: os.stat_result | None) -> None:
    import tempfile  # lazily: only commands that write files pay for it

    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        view = memoryview(raw)
        while view:
            written = _write(fd, view)
            view = view[written:]
        _fsync(fd)
        os.close(fd)
        fd = -1
        if info is not None:  # the file keeps its permissions
            os.chmod(temporary, stat.S_IMODE(info.st_mode))
        else:  # as open() would have made it: 0666 less the umask (mkstemp makes 0600)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, target)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
