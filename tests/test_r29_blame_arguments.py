"""gradcli's own ``check --blame`` runs a custom Function's forward with its non-tensor arguments as
given (issue 29: the framework call's first argument is an object, not a number)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from gradcli.cli.app import app


def test_gradcli_blame_passes_a_function_its_other_arguments_as_given(tmp_path):
    """gradcli's own --blame (and the framework call, whose first argument is an object) ran a custom
    Function's forward with every 0-d argument made a tensor: a string option was compared as one."""
    path = tmp_path / "scaled.py"
    path.write_text(
        "import gradcli as gc\nfrom gradcli.autograd.function import Function\n\n\n"
        "class Scaled(Function):\n"
        "    @staticmethod\n    def forward(ctx, x, mode):\n"
        "        ctx.factor = 2.0 if mode == 'double' else 1.0\n        return x * ctx.factor\n\n"
        "    @staticmethod\n    def backward(ctx, g):\n        return g * ctx.factor, None\n\n\n"
        "def f(x):\n    return gc.sin(Scaled.apply(x, 'double'))\n"
    )
    result = CliRunner().invoke(app, ["check", f"{path}:f", "--at", "x=0.7", "--blame", "--json"])
    assert result.exit_code == 0, result.output + result.stderr
    document = json.loads(result.stdout)
    assert document["blame"] is None and document["ok"] is True
