"""Cross-checks of autograd's gradients: SymPy, finite differences, complex step, formulas.

``check(program, values, ...)`` returns a ``CheckResult``; ``gradcli.testing``
has ``assert_grad_close`` for Python functions in a test suite. The package itself is callable:
``gc.check(f, *args, blame=True)`` is ``face.check_function``, the library's ``gradcli check``
(``gradcli.check`` names this package, so the function and the package are one object).
"""

import sys
import types
from typing import Any

from .face import check_function
from .result import Blame, CheckResult, Kink, MethodCheck
from .run import check


class _CallablePackage(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> CheckResult:
        return check_function(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage

__all__ = ["Blame", "CheckResult", "Kink", "MethodCheck", "check", "check_function"]
