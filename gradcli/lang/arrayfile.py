"""An input read from a file: ``--at w=@weights.npy`` (issue 36).

A model's weights do not fit on a command line: ``@FILE`` names a file holding the value instead.
The format is the file's extension:

- ``.npy`` (NumPy; never a pickle), ``.npz`` (the array named like the input, or its only one);
- ``.csv``, ``.tsv``, ``.txt``: numbers separated by commas, tabs or spaces, a row a line
  (one line: a vector; one number: a scalar);
- ``.pt``, ``.pth``: a tensor saved with ``torch.save`` (read with ``weights_only=True``: no
  code runs), or a dict of them with the input's name as key; needs PyTorch;
- ``.safetensors``: the tensor named like the input, or the only one; needs ``safetensors``.

Every value becomes float64, as a value typed after ``--at`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MissingProgram, UsageError

FORMATS = [".npy", ".npz", ".csv", ".tsv", ".txt", ".pt", ".pth", ".safetensors"]


def read_array(path: str, name: str) -> np.ndarray:
    """The value of input ``name`` from the file at ``path``, as float64.

    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> np.save(os.path.join(folder, "w.npy"), np.arange(3))
    >>> read_array(os.path.join(folder, "w.npy"), "w")
    array([0., 1., 2.])
    """
    what = f"--at {name}=@{path}"
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"{what}: unknown format {suffix or '(no extension)'!r}; use one of {', '.join(FORMATS)}")
    if not file.exists():
        raise UsageError(f"{what}: no such file")
    if file.is_dir():
        raise UsageError(f"{what}: is a directory")
    try:
        value = _READERS[suffix](file, name)
    except (UsageError, MissingProgram):
        raise
    except Exception as exc:  # a damaged or foreign file: say what the reader said
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{what}: cannot read it as {suffix} ({said})") from None
    return _as_float64(value, what)


def _as_float64(value: Any, what: str) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == object or array.dtype.kind not in "biuf":
        raise UsageError(f"{what}: holds {array.dtype} values; give real numbers")
    return array.astype(np.float64)


def _npy(file: Path, name: str) -> Any:
    with open(file, "rb") as stream:
        if stream.read(6) != b"\x93NUMPY":
            raise UsageError(f"--at {name}=@{file}: not a NumPy .npy file (it does not start as one)")
    return np.load(file, allow_pickle=False)


def _npz(file: Path, name: str) -> Any:
    with np.load(file, allow_pickle=False) as archive:
        return _one_of({key: archive[key] for key in archive.files}, name, file)


def _text(file: Path, name: str) -> Any:
    text = file.read_text(encoding="utf-8")
    delimiter = "," if "," in text else "\t" if "\t" in text else None
    rows = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    array = np.loadtxt(rows, delimiter=delimiter, dtype=np.float64, ndmin=0)
    return array


def _torch(file: Path, name: str) -> Any:
    from .frameworks import require  # lazy: PyTorch only for a .pt file

    torch = require("torch")
    loaded = torch.load(file, map_location="cpu", weights_only=True)
    if isinstance(loaded, dict):
        loaded = _one_of(loaded, name, file)
    if not isinstance(loaded, torch.Tensor):
        raise UsageError(f"--at {name}=@{file}: holds a {type(loaded).__name__}, not a tensor")
    return loaded.detach().to(torch.float64).numpy()


def _safetensors(file: Path, name: str) -> Any:
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise MissingProgram(
            f"--at {name}=@{file}: reading .safetensors needs the safetensors package: pip install safetensors"
        ) from None
    return _one_of(load_file(str(file)), name, file)


def _one_of(arrays: dict[str, Any], name: str, file: Path) -> Any:
    """The array keyed by the input's name, or the file's only array."""
    if name in arrays:
        return arrays[name]
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    keys = ", ".join(sorted(arrays)[:8]) + (", ..." if len(arrays) > 8 else "")
    raise UsageError(f"--at {name}=@{file}: it holds {len(arrays)} arrays ({keys}) and none named {name!r}")


_READERS = {".npy": _npy, ".npz": _npz, ".csv": _text, ".tsv": _text, ".txt": _text, ".pt": _torch,
            ".pth": _torch, ".safetensors": _safetensors}  # fmt: skip
