"""``gradcli check FILE.py:f --blame`` of a function that computes with JAX (issue 29): its
``jax.custom_vjp`` rules are checked, each alone (check/jax_blame.py), and the finding is reported
with check's own wording and JSON keys, plus the call's scope and the user's line."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("jax", reason="JAX is not installed: pip install gradcli[jax]")
from typer.testing import CliRunner  # noqa: E402

from gradcli.cli.app import app  # noqa: E402

MODEL = """
import jax
import jax.numpy as jnp


@jax.custom_vjp
def safe_log(x):
    return jnp.log(x)


safe_log.defvjp(lambda x: (jnp.log(x), x), lambda x, g: ({log_rule},))


@jax.custom_vjp
def cube(x):
    return x**3


cube.defvjp(lambda x: (x**3, x), lambda x, g: (3 * g * x * x,))


@jax.jit
def layer(x):
    return jnp.sum(safe_log(cube(x) + 2.0))  # the line of safe_log


def f(x):
    return layer(x)
"""


def _check(tmp_path, log_rule: str, code: int) -> tuple[list[str], dict]:
    path = tmp_path / "jm.py"
    path.write_text(MODEL.format(log_rule=log_rule))
    args = ["check", f"{path}:f", "--at", "x=[0.5,1.5]", "--blame"]
    results = [CliRunner().invoke(app, args), CliRunner().invoke(app, [*args, "--json"])]
    for result in results:
        assert "Traceback" not in result.output + result.stderr, result.output + result.stderr
        assert result.exit_code == code, result.output + result.stderr
    return results[0].stdout.splitlines(), json.loads(results[1].stdout)


def test_jax_blame_names_the_wrong_rule(tmp_path):
    lines, document = _check(tmp_path, "2 * g / x", code=1)  # wrong: g / x
    number = next(k for k, text in enumerate((tmp_path / "jm.py").read_text().splitlines(), 1) if "the line of" in text)
    blame = document["blame"]
    assert (blame["node"], blame["op"], blame["framework"]) == ("n4", "safe_log", "jax")  # as graph --blame marks it
    assert (blame["scope"], blame["line"]) == ("jit:layer/custom_vjp:safe_log", f"jm.py:{number}")
    assert blame["autograd"] == pytest.approx(2 * blame["finite_difference"], rel=1e-6)
    blamed = [text for text in lines if text.startswith("blame: ")]
    assert len(blamed) == 1 and blamed[0].startswith(
        "blame: node n4: custom_vjp:safe_log (safe_log = log(n3)) computes a wrong derivative: for random directions, "
    )
    assert blamed[0].endswith(f"; called in jit:layer/custom_vjp:safe_log at jm.py:{number}")
    note = (
        "--blame checked 2 custom_vjp/custom_jvp calls, each rule against finite differences of its own forward; "
        "JAX's built-in operations are its own and not checked"
    )
    assert note in lines and note in document["notes"]


def test_jax_blame_with_every_rule_right(tmp_path):
    lines, document = _check(tmp_path, "g / x", code=0)
    assert document["blame"] is None and document["ok"] is True
    assert "blame: the derivatives of all 2 nodes agree with finite differences" in lines
    assert np.isclose(document["gradient"]["x"], 3 * np.array([0.5, 1.5]) ** 2 / (np.array([0.5, 1.5]) ** 3 + 2)).all()


def test_graph_blame_marks_the_wrong_rule_on_the_jax_graph(tmp_path):
    path = tmp_path / "jm.py"
    path.write_text(MODEL.format(log_rule="2 * g / x"))
    result = CliRunner().invoke(app, ["graph", f"{path}:f", "--at", "x=[0.5,1.5]", "--blame", "--format", "json"])
    assert result.exit_code == 0, result.output + result.stderr
    blamed = [n for n in json.loads(result.stdout)["nodes"] if n.get("blamed")]
    assert [(n["id"], n["op"], n["scope"]) for n in blamed] == [("n4", "log", "jit:layer/custom_vjp:safe_log")]
    assert f"blame: node {blamed[0]['id']} ({blamed[0]['label']}), marked in red: custom_vjp:safe_log" in result.stderr
