"""THE primitive table: one entry per primitive (see ``core.Primitive``).

Importing this package declares every primitive; ``PRIMITIVES`` maps names to
rows. Nothing here knows about tensors or graphs.
"""

from .along import CUMPROD, CUMSUM, FLIP, LOG_SOFTMAX, SOFTMAX, STD, VAR
from .core import PRIMITIVES, Meta, Primitive, primitive, register, set_binding
from .elementwise import *  # noqa: F403  (the rows, by their constant names)
from .indexing import GATHER, INDEX_SELECT, MASKED_FILL, REPEAT, SPLIT, UNBIND
from .linalg import (
    CROSS,
    DET,
    DIAG_EMBED,
    DIAGONAL,
    DOT,
    INV,
    MATMUL,
    MM,
    MV,
    SOLVE,
    TRACE,
    TRIL,
    TRIU,
    matmul_primitive,
)
from .order import SORT, TOPK
from .reduce import AMAX, AMIN, LOGSUMEXP, MEAN, NORM, PROD, SUM
from .shape import CAT, EXPAND, GETITEM, INDEX_PUT, PERMUTE, RESHAPE, ROLL, SCATTER, STACK, is_basic_index, unbroadcast

__all__ = [
    "PRIMITIVES",
    "Meta",
    "Primitive",
    "primitive",
    "register",
    "set_binding",
    "matmul_primitive",
    "is_basic_index",
    "unbroadcast",
    "DOT",
    "MATMUL",
    "MM",
    "MV",
    "TRACE",
    "INV",
    "DET",
    "DIAGONAL",
    "CROSS",
    "DIAG_EMBED",
    "ROLL",
    "SOLVE",
    "TRIL",
    "TRIU",
    "AMAX",
    "AMIN",
    "LOGSUMEXP",
    "MEAN",
    "NORM",
    "PROD",
    "SUM",
    "CAT",
    "EXPAND",
    "GETITEM",
    "INDEX_PUT",
    "PERMUTE",
    "RESHAPE",
    "SCATTER",
    "STACK",
    "CUMPROD",
    "CUMSUM",
    "FLIP",
    "LOG_SOFTMAX",
    "SOFTMAX",
    "STD",
    "VAR",
    "SORT",
    "TOPK",
    "GATHER",
    "INDEX_SELECT",
    "MASKED_FILL",
    "REPEAT",
    "SPLIT",
    "UNBIND",
]
