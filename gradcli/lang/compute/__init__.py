"""What the commands compute from a program (lang's ``Program``): its value and gradient, Jacobian and
Hessian, derivatives by SymPy, every point of a data set, and the warnings about what autograd may
not see. The top of the lang layer, below check: lang's own modules (text -> tree -> tensors) never
import it (tests/test_r28_architecture.py); the commands only format what it returns.

Each name loads its module on first use, so ``gradcli eval`` reads only ``gradient``:

>>> from gradcli.lang.compute import value_and_grad
>>> from gradcli.lang.program import load
>>> value_and_grad(load("x*y"), {"x": 2.0, "y": 3.0}).gradient["x"]
array(3.)
"""

from __future__ import annotations

from ...autograd import lazy

_NAMES = {
    ".gradient": ["Gradient", "SCALAR_ONLY", "backward_anomaly", "resolve_wrt", "single_output", "value_and_grad"],
    ".matrices": ["ElementLabels", "Matrix", "element_labels", "output_bases", "program_hessian", "program_jacobian"],
    ".points": ["PointsResult", "derivative_series", "evaluate_points", "given_once", "point_values",
                "recorded_points"],
    ".symbolic": ["Explanation", "SymbolicRow", "derivative_text", "evaluate_text", "explain_derivatives",
                  "formatted", "program_value", "quick_texts", "symbolic_derivatives"],
    ".unseen": ["leaves_autograd", "nothing_to_differentiate", "unseen_derivative", "unseen_in_gradient",
                "unused_values"],
}  # fmt: skip

lazy(globals(), {name: (module, name) for module, names in _NAMES.items() for name in names})

__all__ = sorted(name for names in _NAMES.values() for name in names)
