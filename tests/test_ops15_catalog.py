"""`gradcli ops`, `gradcli ops NAME`, `--json` and the README's list of functions all read the table
(issue 15, "The language"): groups, arity, which inputs get a gradient, derivatives, SymPy."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from terminal import gradcli_on_terminal
from typer.testing import CliRunner

from gradcli.cli.app import app
from gradcli.lang import catalog
from gradcli.lang.functions import ARG_NAMES, FUNCTIONS
from gradcli.ops import PRIMITIVES
from gradcli.ops.core import GROUPS

runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def ops_json() -> dict:
    result = run("ops", "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# --- groups: a field of the table, on every row ------------------------------------------------------


@pytest.mark.parametrize("prim", PRIMITIVES.values(), ids=lambda p: p.name)
def test_every_primitive_row_has_a_group(prim):
    assert prim.group in GROUPS, (
        f"primitive {prim.name!r} has group {prim.group!r}: give its row group=... (one of {GROUPS}) "
        "or declare it in a module that sets GROUP"
    )


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_language_function_has_a_group(name):
    assert FUNCTIONS[name].group in GROUPS, f"{name}: group= one of {GROUPS} in lang/functions.py"


def test_the_groups_of_some_rows():
    groups = {e["name"]: e["group"] for e in ops_json()["ops"]}
    assert groups["sin"] == "elementwise" and groups["clamp"] == "elementwise"
    assert groups["floor"] == groups["remainder"] == "rounding"
    assert groups["lt"] == "comparisons"
    assert groups["sum"] == groups["var"] == groups["argmax"] == "reductions"
    assert groups["softmax"] == groups["cumsum"] == "along an axis"
    assert groups["transpose"] == groups["inv"] == groups["outer"] == "matrices"


# --- what each function differentiates ---------------------------------------------------------------


def test_json_says_which_inputs_each_function_differentiates():
    doc = ops_json()
    entries = {e["name"]: e for e in doc["ops"]}
    assert set(entries) == set(FUNCTIONS)
    assert [e["name"] for e in doc["ops"]] == [e["name"] for e in catalog.catalog()]  # by group, then name
    clamp = entries["clamp"]
    assert clamp["differentiates"] == "x, lo, hi"
    assert clamp["derivatives"] == {
        "x": "1 where lo <= x <= hi, else 0",
        "lo": "1 where x < lo < hi",
        "hi": "1 where x > hi, hi < lo or x < lo = hi",
    }
    assert entries["argmax"]["differentiates"] == "none" and entries["argmax"]["derivatives"] == {}
    assert entries["argmax"]["sympy"] is False and entries["argmax"]["complex_analytic"] is False
    for name in ("round", "floor", "ceil", "trunc", "sign"):
        assert entries[name]["differentiates"] == "0 everywhere" and entries[name]["derivatives"] == {"x": "0"}
    assert entries["remainder"]["derivatives"] == {"a": "1", "b": "-floor(a/b)"}
    assert entries["where"]["differentiates"] == "a, b"  # not the condition
    assert entries["lt"]["differentiates"] == "none"
    assert entries["log"]["derivatives"] == {
        "x": "1/x; log(x, b): 1/(x*log(b))",
        "b": "log(x, b): -log(x)/(b*log(b)^2)",
    }
    assert entries["softmax"]["derivatives"] == {"x": "d s_i/dx_j = s_i*([i == j] - s_j)"}
    assert entries["detach"]["differentiates"] == "none" and entries["detach"]["sympy"] is True
    assert entries["sin"]["complex_analytic"] is True and entries["relu"]["complex_analytic"] is False


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_derivative_text_names_its_inputs(name):
    """``d/dNAME = formula`` parts (or "not differentiable..."), so that each input's rule is listed."""
    f = FUNCTIONS[name]
    if f.derivative.startswith(catalog.NOT_DIFFERENTIABLE):
        return
    assert catalog._PART.search(f.derivative), (
        f"{name}: write its derivative as 'd/dx = ...; d/dy = ...' so gradcli ops can list it per input"
    )


def test_differentiable_rows_say_so_per_input():
    """A primitive's inputs without a reverse rule are not listed as differentiated."""
    checked = 0
    for name, f in FUNCTIONS.items():
        prim = f.primitive
        if prim is None or f.arities != (prim.arity,):
            continue
        names = prim.arg_names or ARG_NAMES[prim.arity]
        wanted = [n for n, rule in zip(names, prim.vjp) if rule is not None]
        assert list(catalog.derivatives(f)) == wanted, name
        checked += 1
    assert checked >= 50


# --- gradcli ops NAME --------------------------------------------------------------------------------


def test_ops_name_shows_one_function_in_full():
    result = run("ops", "clamp")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "function         = clamp",
        "what it computes = x limited to [lo, hi]",
        "group            = elementwise",
        "arity            = 3",
        "gradient         = x, lo, hi",
        "d/dx             = 1 where lo <= x <= hi, else 0",
        "d/dlo            = 1 where x < lo < hi",
        "d/dhi            = 1 where x > hi, hi < lo or x < lo = hi",
        "SymPy            = yes",
        "complex-analytic = no (check's complex step is not used through it)",
        "backward         = ClampBackward1",
    ]


def test_ops_name_says_when_there_is_no_sympy_counterpart_or_gradient():
    lines = run("ops", "argmax").stdout.splitlines()
    assert "gradient         = none" in lines
    assert "derivative       = not differentiable (an index)" in lines
    assert "SymPy            = none (gradcli diff and check's sympy method cannot use it)" in lines
    assert "gradient         = 0 everywhere" in run("ops", "round").stdout.splitlines()


def test_ops_name_json_is_the_entry_of_the_list():
    result = run("ops", "round", "--json")
    assert result.exit_code == 0
    entry = json.loads(result.stdout)
    assert entry == next(e for e in ops_json()["ops"] if e["name"] == "round")
    assert entry["backward"] == "RoundBackward0"


def test_ops_takes_an_operator_for_the_function_it_records():
    assert json.loads(run("ops", "%", "--json").stdout)["name"] == "remainder"
    assert json.loads(run("ops", "<", "--json").stdout)["name"] == "lt"


@pytest.mark.parametrize(
    ("typo", "nearest"), [("ln", "log"), ("sofmax", "softmax"), ("Sin", "sin"), ("argmx", "argmax"), ("clip", "clamp")]
)
def test_an_unknown_name_suggests_the_nearest(typo, nearest):
    result = run("ops", typo)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert (
        result.stderr == f"error: unknown function '{typo}'; did you mean '{nearest}'? (gradcli ops lists them all)\n"
    )


def test_an_unknown_name_in_an_expression_suggests_the_nearest():
    result = run("eval", "sofmax(x)", "--at", "x=[1,2]")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == "error: unknown function 'sofmax'; did you mean 'softmax'?"


# --- a pipe gets every row complete; a terminal gets a table that fits ---------------------------------


def test_plain_output_has_every_function_complete_on_its_line():
    lines = run("ops").stdout.splitlines()
    assert lines[0].split()[:6] == ["function", "group", "arity", "gradient", "SymPy", "derivative"]
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(rows) == set(FUNCTIONS)
    for name, f in FUNCTIONS.items():
        assert f.derivative in rows[name] and f.doc in rows[name], name
    assert re.match(r"clamp +elementwise +3 +x, lo, hi +yes +d/dx = 1 where", rows["clamp"])
    assert "x limited to [lo, hi]" in rows["clamp"]
    assert re.match(r"argmax +reductions +1-2 +none +none +not differentiable", rows["argmax"])
    assert re.match(r"round +rounding +1 +0 everywhere +yes +d/dx = 0", rows["round"])


def in_terminal(args: list[str], columns: int = 80) -> str:
    """What gradcli writes to a pseudo-terminal ``columns`` wide (colour codes removed)."""
    pytest.importorskip("pty", reason="needs a pseudo-terminal (the pty module, POSIX only)")
    code, text, _ = gradcli_on_terminal(args, columns)
    assert code == 0, text
    return text


def test_in_an_80_column_terminal_the_table_fits_and_wraps_the_derivatives():
    text = in_terminal(["ops"])
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[0].startswith("┏")
    assert "[i == j]" in text  # softmax's derivative: brackets are text, not rich markup
    header = lines[1].replace("┃", " ").split()
    assert header == ["function", "arity", "gradient", "SymPy", "derivative"]
    first_cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    for group in GROUPS[:6]:  # a heading row for each group with functions
        assert group in first_cells
    assert set(FUNCTIONS) <= set(first_cells)
    # clamp's derivative wraps onto continuation lines, every word of it kept
    start = first_cells.index("clamp")
    rows = [line for line in lines if line.startswith("│")]
    cells = [rows[start].split("│")[5].strip()]
    for line in rows[start + 1 :]:
        if line.split("│")[1].strip():
            break
        cells.append(line.split("│")[5].strip())
    assert len(cells) > 1
    assert " ".join(cells) == FUNCTIONS["clamp"].derivative


def test_in_a_terminal_brackets_in_a_doc_are_text_not_markup():
    text = in_terminal(["ops", "clamp"])
    assert "x limited to [lo, hi]" in text
    assert max(len(line) for line in text.splitlines()) <= 80


def test_a_narrow_terminal_gets_the_plain_lines():
    text = in_terminal(["ops"], columns=40)
    assert text.splitlines()[0].split()[:3] == ["function", "group", "arity"]


# --- the README section ------------------------------------------------------------------------------


def test_the_readme_lists_the_functions_of_the_table():
    text = catalog.README.read_text(encoding="utf-8")
    assert catalog.with_section(text) == text, (
        "README.md's list of functions differs from the table: run `python -m gradcli.lang.catalog` to regenerate it"
    )


def test_the_readme_section_has_every_function_under_its_group():
    section = catalog.readme_section()
    lines = {line.split("**")[1]: line for line in section.splitlines() if line.startswith("- **")}
    assert list(lines) == [g for g in GROUPS if any(f.group == g for f in FUNCTIONS.values())]
    for name, f in FUNCTIONS.items():
        assert f"`{name}`" in lines[f.group], name
    assert "`remainder` (`%`)" in lines["rounding"] and "`lt` (`<`)" in lines["comparisons"]


def test_the_generator_writes_and_checks_a_readme(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n{catalog.BEGIN}\nold\n{catalog.END}\n\nafter\n", encoding="utf-8")
    assert catalog.main(["--check", str(readme)]) == 1
    assert catalog.main([str(readme)]) == 0
    assert readme.read_text(encoding="utf-8") == f"# x\n\n{catalog.readme_section()}\n\nafter\n"
    assert catalog.main(["--check", str(readme)]) == 0


def test_the_generator_refuses_a_readme_without_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# nothing here\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "gradcli.lang.catalog", str(readme)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2 and done.stderr.startswith("error: the README has no section between the markers")
    assert "Traceback" not in done.stderr
