"""Writing an output file (or folder) so that it is either all there or not touched.

Every ``-o`` of every command goes through here. ``-o FILE`` is written to a temporary file in the
same folder, flushed to disk, then renamed over ``FILE`` (a rename within a folder is atomic): a full
disk, a missing permission, an error in a later chunk or an interruption (SIGINT, SIGTERM, SIGHUP)
leaves the old content whole and no temporary file behind. ``atomic_output`` gives the stream for
writing as one goes (``--points``, chunk by chunk); ``write_atomic`` writes bytes at once;
``atomic_folder`` does the same for a folder (``--dask``'s Parquet parts). While an output is open,
SIGTERM and SIGHUP end the command by an exception (exit 128 + the signal: 143 for SIGTERM), as SIGINT
does (exit 130), so that the temporary file is removed on the way out.

A path that is not a regular file (``/dev/stdout``, a named pipe) cannot be replaced and is written
directly, and so is a writable file in a folder where no new file can be made; a symbolic link is
followed, and stays a link. ``refuse_same`` refuses an output that is one of the command's inputs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import UsageError

# the system calls that put the bytes on disk (tests replace them to fill the disk at will)
_write = os.write
_fsync = os.fsync

BUFFER = 1 << 20  # bytes gathered before a write to the disk


def _failed(path: str | os.PathLike[str], exc: OSError) -> UsageError:
    return UsageError(f"cannot write {path}: {exc.strerror or exc} (nothing was changed)")


class _Signals:
    """While an output is open: SIGTERM and SIGHUP raise ``SystemExit(128 + signal)`` and SIGINT a
    KeyboardInterrupt, once (a second signal while the temporary file is being removed is held back);
    only in the main thread, and only where the signal has its default handler (an ignored signal
    stays ignored, a handler of someone else's is left alone)."""

    def __init__(self) -> None:
        import signal
        import threading

        self.previous: dict[int, Any] = {}
        self.caught = False
        self.holding = 0  # inside hold(): a signal is raised when the block ends
        self.pending: int | None = None
        self.raised: int | None = None  # the signal whose exception the handler raised
        self.unraisable: Any = None  # sys.unraisablehook before ours
        if threading.current_thread() is not threading.main_thread():
            return
        self.unraisable, sys.unraisablehook = sys.unraisablehook, self._unraisable
        for name in ("SIGINT", "SIGTERM", "SIGHUP"):
            signum = getattr(signal, name, None)
            if signum is None:
                continue
            handler = signal.getsignal(signum)
            if handler is signal.SIG_DFL or handler is signal.default_int_handler:
                self.previous[signum] = signal.signal(signum, self._stop)

    def _stop(self, signum: int, frame: Any) -> None:
        import signal

        if self.caught:
            return
        self.caught = True
        if self.holding:
            self.pending = signum
            return
        self.raised = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise SystemExit(128 + signum)

    def _unraisable(self, unraisable: Any) -> None:
        """Python swallows an exception raised where it cannot propagate (a GC callback, a ``__del__``)
        and prints its traceback: the handler's is said nowhere then, and raised again by ``lost()``."""
        if self.raised is not None and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
            return
        self.unraisable(unraisable)

    def lost(self) -> None:
        """Raise the signal again if its exception was swallowed on the way (raised inside a GC
        callback of Dask's): called before the result takes the old one's place, which it then never does."""
        if self.raised is not None:
            signum, self.raised, self.caught = self.raised, None, False
            self._stop(signum, None)

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """A signal that arrives in the block is raised when it ends: a temporary file made in it
        (``mkstemp``'s open and return) is then known, and removed."""
        self.holding += 1
        try:
            yield
        finally:
            self.holding -= 1
        if not self.holding and self.pending is not None:
            signum, self.pending = self.pending, None
            self.caught = False
            self._stop(signum, None)

    def restore(self) -> None:
        import signal

        previous, self.previous = self.previous, {}
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if self.unraisable is not None:
            sys.unraisablehook, self.unraisable = self.unraisable, None


class AtomicFile:
    """A file being written to ``path``: ``write`` its bytes, then ``commit`` (the rename) or
    ``discard`` (the old file stays). A failed write is a UsageError naming the path."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        import tempfile  # lazily: only commands that write files pay for it

        self.path, self.fd, self.temporary, self.direct = path, -1, None, None
        self.pending = bytearray()
        self.position = 0
        self.signals: _Signals | None = None
        target = Path(path)
        try:
            try:
                self.info: os.stat_result | None = os.stat(target)  # follows a symbolic link: its target is replaced
            except FileNotFoundError:
                self.info = None
            if self.info is not None and stat.S_ISDIR(self.info.st_mode):
                raise UsageError(f"cannot write {path}: it is a directory")
            self.signals = _Signals()
            if self.info is not None and not stat.S_ISREG(self.info.st_mode):  # a device or a pipe: no rename
                self.direct = open(target, "wb")  # noqa: SIM115 - closed by commit/discard
                return
            real = Path(os.path.realpath(target))
            self.target = real
            try:
                with self.signals.hold():
                    self.fd, self.temporary = tempfile.mkstemp(prefix=f".{real.name}.", suffix=".tmp", dir=real.parent)
            except PermissionError:
                if self.info is None or not os.access(target, os.W_OK):
                    raise
                # a file we may write in a folder we may not: written in place, as before (not atomic)
                self.direct = open(target, "wb")  # noqa: SIM115 - closed by commit/discard
        except OSError as exc:
            self.discard()
            raise _failed(path, exc) from None
        except BaseException:
            self.discard()
            raise

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self.closed:  # discarded: what a writer still writes (its footer) goes nowhere
            return len(data)
        self.pending += data
        self.position += len(data)
        if len(self.pending) >= BUFFER:
            self._drain()
        return len(data)

    def flush(self) -> None:
        self._drain()

    def _drain(self) -> None:
        data = bytes(self.pending)  # immutable: a failed write leaves no view on the buffer
        self.pending.clear()
        try:
            if self.direct is not None:
                self.direct.write(data)
                return
            view = memoryview(data)
            while view:
                written = _write(self.fd, view)
                view = view[written:]
        except OSError as exc:
            raise _failed(self.path, exc) from None

    # what pyarrow asks of a file object it writes to (closing it is commit's or discard's work)
    closed = False

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def close(self) -> None:
        self._drain()

    def commit(self) -> None:
        """Put the bytes on disk and the file in place of the old one (or a UsageError, and no change).
        The signal handlers are put back whichever way it ends (a device written directly included)."""
        try:
            self._commit()
        finally:
            if self.signals is not None:
                self.signals.restore()

    def _commit(self) -> None:
        try:
            self._drain()
            if self.direct is not None:
                self.direct.close()
                self.direct = None
                return
            _fsync(self.fd)
            os.close(self.fd)
            self.fd = -1
            assert self.temporary is not None
            if self.info is not None:  # the file keeps its permissions
                os.chmod(self.temporary, stat.S_IMODE(self.info.st_mode))
            else:  # as open() would have made it: 0666 less the umask (mkstemp makes 0600)
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(self.temporary, 0o666 & ~umask)
            assert self.signals is not None
            self.signals.lost()
            with self.signals.hold():
                os.replace(self.temporary, self.target)
                self.temporary = None
        except OSError as exc:
            self.discard()
            raise _failed(self.path, exc) from None
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the temporary file; the old file is as it was."""
        self.closed = True
        self._close_quietly()
        if self.temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.temporary)
            self.temporary = None
        if self.signals is not None:
            self.signals.restore()

    def _close_quietly(self) -> None:
        self.pending.clear()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1
        if self.direct is not None:
            with contextlib.suppress(OSError):
                self.direct.close()
            self.direct = None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str]) -> Iterator[AtomicFile]:
    """A binary file object for ``path``: renamed into place when the block ends normally, removed
    when it ends by an exception (a bad row, a full disk, SIGINT, SIGTERM)."""
    output = AtomicFile(path)
    try:
        yield output
    except BaseException:
        output.discard()
        raise
    output.commit()


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` whole, or raise a UsageError and keep the old file."""
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    with atomic_output(path) as stream:
        stream.write(raw)


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike[str]) -> Iterator[str]:
    """A temporary folder beside ``path`` to fill: it takes ``path``'s place when the block ends
    normally (an old folder there is removed), and is removed when it ends by an exception."""
    import shutil
    import tempfile

    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_dir():
        raise UsageError(f"cannot write the folder {path}: a file of that name is in the way")
    signals = _Signals()
    try:
        temporary = None
        try:
            with signals.hold():
                temporary = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
            yield temporary
            signals.lost()
            with signals.hold():  # the old folder out, the new one in: not to be cut in between
                old = None
                if target.exists():
                    old = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent)
                    os.replace(target, os.path.join(old, "folder"))
                os.replace(temporary, target)
                temporary = None
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
        except OSError as exc:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
            raise _failed(path, exc) from None
        except BaseException:
            if temporary is not None:
                shutil.rmtree(temporary, ignore_errors=True)
            raise
    finally:
        signals.restore()


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def refuse_same(out: str | os.PathLike[str] | None, inputs: Iterable[str | None], option: str = "-o") -> None:
    """A UsageError if the output ``out`` is one of the ``inputs`` (the same file by any name, a link
    or a hard link), or a folder that holds one: writing it would destroy what is being read."""
    if out is None or str(out) == "-" or not os.path.exists(out):
        return
    real_out = os.path.realpath(out)
    for given in inputs:
        if given is None or given == "-" or not os.path.exists(given):
            continue
        with contextlib.suppress(OSError):
            if os.path.samefile(out, given):
                raise UsageError(f"{option} {out} is also an input ({given}): write the result to another file")
            if _inside(os.path.realpath(given), real_out):
                raise UsageError(f"{option} {out} holds an input ({given}): write the result to another folder")
