"""``gradcli check --cases FILE.toml`` (issue 20): verdicts, summary, exit codes, JSON, JUnit, -k, --jobs,
--fail-fast, --update, and files that cannot be used."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.check.cases import insert_expectations, parse_cases, selector
from gradcli.cli.app import app

runner = CliRunner()

MIXED = """\
# a file mixing every verdict
[defaults]
methods = ["fd"]          # cheap: finite differences only

[[case]]
name = "product rule"
expr = "x^2 * y"
at = { x = 2, y = 3 }
expect = { x = "2*x*y", y = "x^2" }

[[case]]
name = "sign error"
expr = "sin(x)"
at = { x = 1 }
expect = { x = "-cos(x)" }

[[case]]
name = "inconclusive"
expr = "sin(exp(x))"
at = { x = 40 }

[[case]]
name = "broken syntax"
expr = "x^2 + * y"
at = { x = 1, y = 2 }

[[case]]
name = "unknown name"
expr = "sni(x)"
at = { x = 1 }

[[case]]
name = "missing file"
file = "nowhere.gc"
at = { x = 1 }

[[case]]
name = "program file"
file = "model.gc"
at = "x=0.5, w=2"
expect = { w = "2*tanh(w*x)*(1 - tanh(w*x)^2)*x" }
"""


def run(*args: str):
    result = runner.invoke(app, ["check", *args])
    assert "Traceback" not in result.stdout + result.stderr, result.stdout + result.stderr
    return result


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    (tmp_path / "model.gc").write_text("h = tanh(w*x)\nh^2\n")
    path = tmp_path / "cases.toml"
    path.write_text(MIXED)
    return path


def _lines(stdout: str) -> list[tuple[str, str]]:
    """(status, name) of each case line (the lines that are not indented details)."""
    found = []
    for line in stdout.splitlines():
        match = re.match(r"^(ok|MISMATCH|FAILED|INCONCLUSIVE|ERROR) +(.+?) +\d+\.\d\d s$", line)
        if match:
            found.append((match[1], match[2]))
    return found


EXPECTED = [
    ("ok", "product rule"),
    ("MISMATCH", "sign error"),
    ("INCONCLUSIVE", "inconclusive"),
    ("ERROR", "broken syntax"),
    ("ERROR", "unknown name"),
    ("ERROR", "missing file"),
    ("ok", "program file"),
]


def test_every_case_gets_its_verdict_and_the_summary_counts_them(mixed, monkeypatch, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # paths in a case are relative to the cases file, not the working directory
    result = run("--cases", str(mixed))
    assert result.exit_code == 1, result.stdout + result.stderr
    assert _lines(result.stdout) == EXPECTED
    assert re.fullmatch(r"2 passed, 1 failed, 1 inconclusive, 3 errors in \d+\.\d s", result.stdout.splitlines()[-1])
    out = result.stdout
    assert "    MISMATCH: d/dx: autograd 0.5403023059 but the expected formula gives -0.5403023059" in out
    assert re.search(r"^    d/dx +0\.5403023059 +0\.5403023059 +-0\.5403023059 .*MISMATCH$", out, re.M)
    # a broken case shows its error and caret, and the others still ran
    i = out.splitlines().index(next(line for line in out.splitlines() if line.startswith("ERROR         broken")))
    detail = out.splitlines()[i + 1 : i + 4]
    assert detail[1].strip() == "x^2 + * y" and detail[2].strip() == "^"
    assert detail[2].index("^") == detail[1].index("*", detail[1].index("+"))
    assert "    unknown function 'sni'; did you mean 'sin'?" in out
    assert "    file = 'nowhere.gc': no such file" in out
    assert result.stderr == ""


def test_all_passing_exits_0(tmp_path):
    path = tmp_path / "ok.toml"
    path.write_text('[[case]]\nname = "square"\nexpr = "x^2"\nat = { x = 3 }\nexpect = { x = "2*x" }\nmethods = "fd"\n')
    result = run("--cases", str(path))
    assert result.exit_code == 0, result.stdout
    assert _lines(result.stdout) == [("ok", "square")]
    assert re.fullmatch(
        r"1 passed, 0 failed, 0 inconclusive, 0 errors in \d+\.\d s\n", result.stdout.splitlines()[-1] + "\n"
    )


def test_json_has_each_cases_full_check_result(mixed):
    result = run("--cases", str(mixed), "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert [(c["status"], c["name"]) for c in doc["cases"]] == EXPECTED
    assert doc["ok"] is False
    assert {k: v for k, v in doc["summary"].items() if k != "time"} == {
        "passed": 2, "failed": 1, "inconclusive": 1, "errors": 3, "deselected": 0, "not_run": 0,
    }  # fmt: skip
    # the same keys and values as a single `check --json` of the same case
    single = run("x^2 * y", "--at", "x=2,y=3", "--expect", "x=2*x*y", "--expect", "y=x^2", "--method", "fd", "--json")
    one = json.loads(single.stdout)
    first = doc["cases"][0]["result"]
    assert set(first) == set(one)
    assert first["gradient"] == one["gradient"] == {"x": 12.0, "y": 4.0}
    assert first["verdict"] == one["verdict"] == doc["cases"][0]["verdict"]
    assert doc["cases"][1]["result"]["checks"]["expect"]["values"] == {"x": pytest.approx(-0.5403023058681398)}
    assert doc["cases"][3]["error"].startswith("expected a value") and "result" not in doc["cases"][3]
    assert all(c["time"] >= 0 for c in doc["cases"])


def test_junit_report_reads_back(mixed, tmp_path):
    report = tmp_path / "out" / "report.xml"
    report.parent.mkdir()
    result = run("--cases", str(mixed), "--junit", str(report))
    assert result.exit_code == 1
    assert result.stderr == f"wrote {report} (JUnit XML, 7 test cases)\n"
    root = ET.parse(report).getroot()
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "7",
        "2",
        "3",
        "0",
    )
    assert float(suite.get("time")) >= 0
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [name for _, name in EXPECTED]
    assert all(float(c.get("time")) >= 0 and c.get("classname") == "cases.toml" for c in cases)
    ok, sign, inconclusive, syntax, unknown, missing, program = cases
    assert list(ok) == [] and list(program) == []
    (failure,) = sign.findall("failure")
    assert failure.get("type") == "MISMATCH"
    assert failure.get("message").startswith("MISMATCH: d/dx: autograd 0.5403023059 but the expected formula gives")
    assert "d/dx" in failure.text and "finite differences" in failure.text and "expected" in failure.text
    assert inconclusive.find("failure").get("type") == "INCONCLUSIVE"
    assert inconclusive.find("failure").get("message").startswith("INCONCLUSIVE")
    error = syntax.find("error")
    assert error.get("message").startswith("expected a value") and error.text.splitlines()[1].strip() == "x^2 + * y"
    assert unknown.find("error").get("message") == "unknown function 'sni'; did you mean 'sin'?"
    assert missing.find("error") is not None


def test_k_selects_cases_by_name_like_pytest(mixed):
    result = run("--cases", str(mixed), "-k", "rule or program")
    assert result.exit_code == 0
    assert _lines(result.stdout) == [("ok", "product rule"), ("ok", "program file")]
    assert re.fullmatch(
        r"2 passed, 0 failed, 0 inconclusive, 0 errors, 5 deselected in \d+\.\d s", result.stdout.splitlines()[-1]
    )
    result = run("--cases", str(mixed), "-k", "not (error or broken or unknown or missing or inconclusive)")
    assert [name for _, name in _lines(result.stdout)] == ["product rule", "program file"]
    result = run("--cases", str(mixed), "-k", "nothing")
    assert result.exit_code == 2 and result.stderr == "error: -k 'nothing' selects none of the 7 cases\n"


def test_selector():
    names = ["product rule", "sign error", "Sum of cubes"]
    assert [n for n in names if selector("sum")(n)] == ["Sum of cubes"]
    assert [n for n in names if selector("r and not sign")(n)] == ["product rule"]
    assert [n for n in names if selector("(sign or sum) and not cubes")(n)] == ["sign error"]
    for bad in ("a and", "(a", "or b", "a b"):
        with pytest.raises(Exception, match="-k"):
            selector(bad)


def test_two_jobs_give_the_same_results_as_one_in_file_order(mixed):
    one = json.loads(run("--cases", str(mixed), "--json").stdout)
    two = json.loads(run("--cases", str(mixed), "--json", "--jobs", "2").stdout)
    strip = lambda doc: [{k: v for k, v in c.items() if k != "time"} for c in doc["cases"]]  # noqa: E731
    assert strip(one) == strip(two)
    assert two["summary"]["passed"] == 2 and two["summary"]["errors"] == 3


def test_fail_fast_stops_at_the_first_case_that_does_not_pass(mixed):
    result = run("--cases", str(mixed), "--fail-fast")
    assert result.exit_code == 1
    assert _lines(result.stdout) == EXPECTED[:2]
    assert re.fullmatch(
        r"1 passed, 1 failed, 0 inconclusive, 0 errors, 5 not run \(--fail-fast\) in \d+\.\d s",
        result.stdout.splitlines()[-1],
    )


UPDATE = """\
# derivatives to pin
[defaults]
methods = "fd"

[[case]]
name = "half pinned"
expr = "x^2 * y"  # the model
at = { x = 2, y = 3 }
expect = { x = "2*x*y" }  # y is missing

[[case]]
name = "none pinned"
expr = "exp(x) * sin(x) + log(1 + exp(w))"
at = { x = 0.5, w = -3 }
# a comment that stays below the case's keys

[[case]]
name = "table"
expr = "tanh(a * w)"
at = "a=2, w=0.1"
[case.expect]
a = "(1 - tanh(a*w)^2) * w"

[[case]]
name = "python function"
function = "f.py:f"
at = { x = 1 }
"""


def test_update_fills_missing_expects_keeps_comments_and_then_passes(tmp_path):
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    path = tmp_path / "pin.toml"
    path.write_text(UPDATE)
    (tmp_path / "f.py").write_text("def f(x):\n    return x * x\n")
    result = run("--cases", str(path), "--update")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert "--update: 4 expect entries added to 3 case(s)" in result.stderr
    assert "case 'python function' left as it is: a Python function has no symbolic form" in result.stderr
    text = path.read_text()
    old, new = UPDATE.splitlines(), text.splitlines()
    added = [line for line in new if line not in old]
    assert len(new) == len(old) + 2 and len(added) == 3  # one line grew an entry, two are new
    assert [line for line in old if line not in new] == ['expect = { x = "2*x*y" }  # y is missing']
    assert added[0].startswith('expect = { x = "2*x*y", y = ') and added[0].endswith(" }  # y is missing")
    assert new[new.index("# a comment that stays below the case's keys") - 1].startswith("expect = { x = ")
    cases = tomllib.loads(text)["case"]
    assert list(cases[0]["expect"]) == ["x", "y"]
    assert list(cases[1]["expect"]) == ["x", "w"]
    assert list(cases[2]["expect"]) == ["a", "w"]
    # what was written is each derivative: the updated file passes, by its expects among others
    again = json.loads(run("--cases", str(path), "--json").stdout)
    assert again["ok"] is True
    for case in again["cases"][:3]:
        assert case["result"]["checks"]["expect"]["ok"] is True
    # and a second --update finds nothing to add, leaving the file as it is
    result = run("--cases", str(path), "--update")
    assert result.exit_code == 0 and path.read_text() == text and "nothing to add" in result.stderr


def test_insert_expectations_into_each_form():
    text = '[[case]]\nexpr = "x*y"\nexpect = {}\n\n[[case]]\nexpr = "x"\nexpect.x = "1"\n'
    out = insert_expectations(text, 1, {"x": "y", "y": "x"})
    assert out.splitlines()[2] == 'expect = { x = "y", y = "x" }'
    out = insert_expectations(out, 2, {"z": 'a "quoted" \\ text'})
    assert out.splitlines()[-1] == 'expect.z = "a \\"quoted\\" \\\\ text"'
    cases = parse_cases(out, "t.toml")
    assert cases[0].fields["expect"] == {"x": "y", "y": "x"}
    assert cases[1].fields["expect"] == {"x": "1", "z": 'a "quoted" \\ text'}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[[case]]\nname = "a"\nexpr = "x^2\n', r"^error: --cases \S+: not valid TOML: .*\(at line 3, column 12\)$"),
        (
            '[[case]]\nexpr = "x"\n\n[[case]]\nexpr = "x"\nexpct = { x = "1" }\n',
            r"^error: --cases \S+:4: unknown key 'expct' in a case; did you mean 'expect'\?$",
        ),
        (
            '[[case]]\nname = "no program"\nat = { x = 1 }\n',
            r"a case needs one of expr, file or function \(it has none\)",
        ),
        ('[[case]]\nexpr = "x"\nrtol = "small"\n', r"rtol = 'small' is not a number"),
        ('[defaults]\nexpect = { x = "1" }\n[[case]]\nexpr = "x"\n', r"\[defaults\] cannot hold 'expect'"),
        ("# nothing\n", r"no cases: add \[\[case\]\] tables"),
    ],
    ids=["bad TOML", "unknown key", "no program", "wrong type", "defaults key", "empty"],
)
def test_a_file_that_cannot_be_used_exits_2(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    result = run("--cases", str(path))
    assert result.exit_code == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and re.search(message, result.stderr.strip()), result.stderr


def test_options_that_belong_to_the_file_are_refused_with_cases(mixed, tmp_path):
    result = run("x^2", "--cases", str(mixed), "--rtol", "0")  # 0 too: a value given, though falsy
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: --cases takes each case's program and options from the file, not EXPR, --rtol"
    )
    result = run("--junit", str(tmp_path / "r.xml"))
    assert result.exit_code == 2 and "go with --cases FILE.toml" in result.stderr
    result = run("--cases", str(tmp_path / "absent.toml"))
    assert result.exit_code == 2 and result.stderr == f"error: --cases {tmp_path / 'absent.toml'}: no such file\n"


def test_points_every_row_checked(tmp_path):
    (tmp_path / "p.csv").write_text("x,y\n1,2\n0.5,3\n-1,4\n")
    path = tmp_path / "points.toml"
    path.write_text(
        '[defaults]\nmethods = "fd"\n\n[[case]]\nname = "right"\nexpr = "x^2 * y + c"\npoints = "p.csv"\nat = { c = 1 }\n'
        'expect = { x = "2*x*y" }\n\n[[case]]\nname = "wrong at rows 1 and 3"\nexpr = "x^2 * y"\npoints = "p.csv"\n'
        'expect = { x = "6*x" }\n'
    )
    doc = json.loads(run("--cases", str(path), "--json").stdout)
    right, wrong = doc["cases"]
    assert right["status"] == "ok" and right["verdict"].startswith("all 3 rows: OK")
    assert right["result"]["points"] == {"file": "p.csv", "rows": 3, "failed_rows": []}
    assert wrong["status"] == "MISMATCH" and wrong["result"]["points"]["failed_rows"] == [1, 3]
    assert wrong["verdict"].startswith(
        "row 1 of 3 (x = 1, y = 2): MISMATCH: d/dx: autograd 4 but the expected formula gives 6"
    )


def test_torch_agrees_with_a_passing_case(tmp_path):
    torch = pytest.importorskip("torch", reason="compares with PyTorch, the reference (pip install torch)")
    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    w = torch.tensor(-1.3, dtype=torch.float64, requires_grad=True)
    (torch.sin(x * w) * torch.exp(w)).backward()
    path = tmp_path / "t.toml"
    path.write_text('[[case]]\nexpr = "sin(x*w) * exp(w)"\nat = { x = 0.7, w = -1.3 }\nmethods = "fd"\n')
    doc = json.loads(run("--cases", str(path), "--json").stdout)
    gradient = doc["cases"][0]["result"]["gradient"]
    assert gradient["x"] == pytest.approx(x.grad.item(), rel=1e-12)
    assert gradient["w"] == pytest.approx(w.grad.item(), rel=1e-12)
    assert doc["cases"][0]["name"] == "sin(x*w) * exp(w)"  # a case without a name is named by its program


def test_bad_values_and_a_raising_function_are_errors_of_their_case_alone(tmp_path):
    (tmp_path / "f.py").write_text("def f(x):\n    raise ValueError('no good')\n")
    path = tmp_path / "values.toml"
    path.write_text(
        '[[case]]\nname = "ragged"\nexpr = "x"\nat = { x = [1, [2]] }\n\n'
        '[[case]]\nname = "infinite"\nexpr = "x"\nat = { x = "1/0" }\n\n'
        '[[case]]\nname = "raises"\nfunction = "f.py:f"\nat = { x = 1 }\n\n'
        '[[case]]\nname = "fine"\nexpr = "3*x"\nat = "x=1"\nmethods = "fd"\n'
    )
    doc = json.loads(run("--cases", str(path), "--json").stdout)
    assert [c["status"] for c in doc["cases"]] == ["ERROR", "ERROR", "ERROR", "ok"]
    assert doc["cases"][0]["error"] == "at x = [1, [2]]: not a number or a rectangular list of numbers"
    assert doc["cases"][1]["error"] == "at x: '1/0' is not a finite float64 number (too large, or 1/0)"
    assert "no good" in doc["cases"][2]["error"]
    assert doc["cases"][3]["result"]["gradient"] == {"x": 3.0}
