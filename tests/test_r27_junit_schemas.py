"""Issue 27: ``check --cases --junit`` writes a report that the CI systems' schemas accept.

The report's ``file=`` on ``<testcase>`` was rejected by the Jenkins xUnit plugin's junit-10.xsd in
its newer form. Each report here is validated against the schemas CI systems read (tests/schemas/,
each with its origin): the Jenkins xUnit plugin's, newer and older, and the Apache Ant JUnit
schema, the strictest; GitLab publishes no schema, so its parser's reading is restated below.
Nothing is lost on the way: the file goes into the suite's properties, warnings into its
system-err, each under its case's name.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gradcli.cli.app import app

xmlschema = pytest.importorskip("xmlschema", reason="xmlschema validates the JUnit report (pip install -e '.[test]')")

SCHEMAS = Path(__file__).parent / "schemas"
NAMES = ["jenkins-xunit-junit-10-newer.xsd", "jenkins-xunit-junit-10-older.xsd", "ant-junit.xsd"]

#: (name, program, point, expect): one case of each verdict, a control character in a name, a warning
CASES = [
    ("product rule", "x*y", "{ x = 3, y = 4 }", '{ x = "y" }'),
    ("sign error", "cos(x)", "{ x = 1 }", '{ x = "sin(x)" }'),
    ("inconclusive", "sin(exp(x))", "{ x = 40 }", None),
    ("broken  syntax\\u0007", "x +* 1", "{ x = 1 }", None),
    ("not finite", "log(x) + x", "{ x = -1 }", None),
    ("unused value", "x^2", "{ x = 1, y = 2 }", '{ x = "2*x" }'),
]
TOML = '[defaults]\nmethods = ["fd"]\n' + "".join(
    f'\n[[case]]\nname = "{n}"\nexpr = "{p}"\nat = {a}\n' + (f"expect = {e}\n" if e else "") for n, p, a, e in CASES
)

STATUSES = {
    "product rule": None,
    "sign error": "failure",
    "inconclusive": "failure",
    "broken  syntax\\x07": "error",
    "not finite": "failure",
    "unused value": None,
}


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("junit")
    cases = folder / "cases.toml"
    cases.write_text(TOML)
    path = folder / "report.xml"
    result = CliRunner().invoke(app, ["check", "--cases", str(cases), "--junit", str(path)])
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return path


@pytest.mark.parametrize("name", NAMES)
def test_the_report_is_valid_for(name, report):
    schema = xmlschema.XMLSchema(SCHEMAS / name)
    errors = [f"{e.path}: {e.reason}" for e in schema.iter_errors(str(report))]
    assert errors == []


@pytest.mark.parametrize("name", NAMES)
def test_the_schemas_refuse_what_they_should(name, report):
    """A schema that accepts everything proves nothing: each refuses a report it must refuse."""
    schema = xmlschema.XMLSchema(SCHEMAS / name)
    root = ET.parse(report).getroot()
    del root.find("testsuite").find("testcase").attrib["name"]  # every schema requires a testcase's name
    assert not schema.is_valid(ET.tostring(root, encoding="unicode"))


def test_the_old_report_shape_is_refused_where_issue_27_says():
    """The shape round 20 wrote (file= on a testcase) fails the newer Jenkins schema and Ant's, and
    passes the older Jenkins one, as the issue found."""
    old = (
        '<testsuites name="gradcli check" tests="1" time="0.010" failures="0" errors="0">'
        '<testsuite name="cases.toml" tests="1" failures="0" errors="0" skipped="0" time="0.010"'
        ' timestamp="2026-11-26T23:00:00">'
        '<testcase classname="cases.toml" name="a" time="0.010" file="cases.toml"/>'
        "</testsuite></testsuites>"
    )
    valid = {name: xmlschema.XMLSchema(SCHEMAS / name).is_valid(old) for name in NAMES}
    assert valid == {NAMES[0]: False, NAMES[1]: True, NAMES[2]: False}


def _gitlab_cases(root: ET.Element) -> list[dict[str, str | None]]:
    """The cases as GitLab's JUnit parser (lib/gitlab/ci/parsers/test/junit.rb) reads them: every
    testcase under testsuites/testsuite at any depth; its status from a failure or error child
    (failed; their text is the detail), skipped, else success; name, classname, time, file."""
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    found = []
    for suite in suites:
        for case in suite.findall("testcase"):
            status, detail = "success", None
            for tag, said in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
                child = case.find(tag)
                if child is not None:
                    status, detail = said, child.text
                    break
            found.append(
                {"name": case.get("name"), "classname": case.get("classname"), "status": status, "detail": detail}
            )
    return found


def test_gitlab_reads_every_case_and_its_status(report):
    cases = _gitlab_cases(ET.parse(report).getroot())
    assert [c["name"] for c in cases] == list(STATUSES)
    wanted = {None: "success", "failure": "failed", "error": "error"}
    assert [c["status"] for c in cases] == [wanted[s] for s in STATUSES.values()]
    assert all(c["classname"] == "cases.toml" for c in cases)
    sign = cases[1]["detail"]
    assert sign is not None and sign.startswith("MISMATCH: d/dx: autograd -0.8414709848 but the expected formula")


def test_no_information_is_lost(report):
    root = ET.parse(report).getroot()
    (suite,) = root.findall("testsuite")
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["file"] == str(report.parent / "cases.toml")  # was file= on every testcase
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        "6",
        "3",
        "1",
        "0",
    )
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    for name, tag in STATUSES.items():
        children = [child.tag for child in cases[name]]
        assert children == ([] if tag is None else [tag])
    assert cases["sign error"].find("failure").get("type") == "MISMATCH"
    assert cases["broken  syntax\\x07"].find("error").get("type") == "ERROR"
    assert cases["not finite"].find("failure").get("message") == (
        "FAILED: the value is nan ('log(x)' at column 1 gave nan from input -1)"
    )
    # a case's warning, under its name (a testcase holds no system-err in Ant's schema)
    assert suite.find("system-err").text == "unused value: warning: --at y is not used by the expression"
    assert suite.find("system-out") is not None
