"""Cross-checks of autograd's gradients: SymPy, finite differences, complex step, formulas.

``check(program, values, ...)`` returns a ``CheckResult``; ``gradcli.testing``
has ``assert_grad_close`` for Python functions in a test suite.
"""

from .result import Blame, CheckResult, Kink, MethodCheck
from .run import check

__all__ = ["Blame", "CheckResult", "Kink", "MethodCheck", "check"]
