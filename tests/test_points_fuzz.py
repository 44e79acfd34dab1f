"""The hunt for per-point disagreements (issue 12 and 13): random expressions of the language
(``test_random_expressions``' generator: scalars, vectors, matrices, every operator and function,
indexing, named steps, conditionals), their scalar variables read from a points file and the others
given with ``--at``; every point's value and gradient must be what ``eval --at`` gives at that
point, to 1e-12. ``GRADCLI_POINTS_FUZZ=N`` runs N expressions (nightly-sized) instead of 300."""

from __future__ import annotations

import os

import numpy as np
import pytest
from test_random_expressions import SPREAD, VARIABLES, draw

from gradcli.lang.compute import points as points_module
from gradcli.lang.compute import value_and_grad
from gradcli.lang.compute.points import evaluate_points
from gradcli.lang.program import load

COUNT = int(os.environ.get("GRADCLI_POINTS_FUZZ", "300"))
ROWS = 4


def _agree(got: np.ndarray, want: np.ndarray) -> bool:
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    return bool(np.allclose(got, want, rtol=1e-12, atol=1e-13 * scale, equal_nan=True))


@pytest.mark.parametrize("chunk", range(3))
def test_random_expressions_per_point_agree_with_eval_at(chunk, monkeypatch):
    looped = []
    original = points_module._point_by_point
    monkeypatch.setattr(points_module, "_point_by_point", lambda *a: looped.append(a) or original(*a))
    rng = np.random.default_rng(chunk)
    tried = 0
    for seed in range(chunk * COUNT // 3, (chunk + 1) * COUNT // 3):
        case = draw(7_000_001 + seed)
        columns = {
            n: np.concatenate([[case.values[n]], rng.uniform(-SPREAD, SPREAD, ROWS - 1)])
            for n in case.expr.variables
            if VARIABLES[n] == ()
        }
        if not columns:
            continue
        tried += 1
        shared = {n: v for n, v in case.values.items() if n not in columns}
        program = load(case.expr.text)
        names, result = evaluate_points(program, columns, shared, case.expr.variables, None)
        for i in range(ROWS):
            one = value_and_grad(program, {**shared, **{n: c[i] for n, c in columns.items()}}, names)
            assert _agree(result.value[i], one.value), (case.expr.text, i)
            for name in names:
                assert _agree(result.gradient[name][i], one.gradient[name]), (case.expr.text, i, name)
    assert tried > COUNT // 6
    assert not looped  # every generated expression ran batched, none point by point
