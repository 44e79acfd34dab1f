"""Issue 16 on a real pseudo-terminal (COLUMNS=80, with and without NO_COLOR): rich markup in user text is
shown as typed (titles, tables, tree labels); NO_COLOR removes colour only, not the tables; titles and tree
lines wrap between words, never inside one."""

from __future__ import annotations

import pytest
from test_output16_complete import in_terminal, piped, posix_only

pytestmark = posix_only


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
@pytest.mark.parametrize(
    "args,shown_text",
    [
        (["jacobian", "[x*y, x+y]", "--at", "x=1,y=2"], "Jacobian of [x*y, x+y]\n"),
        (["hessian", "sum([b, x])^2", "--at", "b=1,x=2"], "Hessian of sum([b, x])^2\n"),
        (["eval", "sum([b, x])^2", "--at", "b=1,x=2"], "sum([b, x])^2   at b = 1, x = 2\n"),
        (["check", "sum([b, x])^2", "--at", "b=1,x=2", "--method", "fd"], "sum([b, x])^2   at b = 1, x = 2\n"),
        (["diff", "sum([b, x])^2"], "sum([b, x])^2\n"),
        (["graph", "sum([b, x])^2", "--at", "b=1,x=2"], "sum([b, x])^2  [PowBackward0]"),
        (["ops", "clamp"], "[lo, hi]"),
    ],
    ids=["jacobian", "hessian", "eval", "check", "diff", "graph", "ops"],
)
def test_rich_markup_in_user_text_is_shown_as_typed(args, shown_text, no_color):
    code, shown, raw = in_terminal(*args, columns=80, no_color=no_color)
    assert code == 0, shown
    assert shown_text in shown
    assert "│" in shown or "└──" in shown  # a table or a tree: NO_COLOR keeps them
    assert ("\x1b[" in raw) is not no_color  # colour codes only without NO_COLOR


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_the_jacobian_table_with_brackets_at_80_columns(no_color):
    code, shown, _ = in_terminal("jacobian", "[x*y, x+y]", "--at", "x=1,y=2", no_color=no_color)
    assert (code, shown) == (
        0,
        "Jacobian of [x*y, x+y]\n"
        "┏━━━━━━┳━━━┳━━━┓\n"
        "┃      ┃ x ┃ y ┃\n"
        "┡━━━━━━╇━━━╇━━━┩\n"
        "│ f[0] │ 2 │ 1 │\n"
        "│ f[1] │ 1 │ 1 │\n"
        "└──────┴───┴───┘\n",
    )


def _words(text: str) -> set[str]:
    guides = set("│├└─┌┐┘┬┴┼┏┓┗┛┳┻╋┃━┡┩╇·")
    return {w for w in text.split() if not set(w) <= guides}


LONG = "a = sin(x*y) + cos(x/y); b = exp(a*x); c = log(b + a^2) * tanh(x) + atan2(long_name_y, x)"


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
@pytest.mark.parametrize(
    "args",
    [
        ["graph", LONG, "--at", "x=0.3,y=1.7,long_name_y=2.5"],
        ["jacobian", LONG.replace("c = ", "c = [") + ", x*long_name_y]", "--at", "x=0.3,y=1.7,long_name_y=2.5"],
        ["hessian", LONG, "--at", "x=0.3,y=1.7,long_name_y=2.5"],
        ["eval", LONG, "--at", "x=0.3,y=1.7,long_name_y=2.5"],
    ],
    ids=["graph-tree", "jacobian", "hessian", "eval"],
)
def test_titles_and_tree_lines_do_not_wrap_inside_a_word_at_80_columns(args, no_color):
    code, shown, _ = in_terminal(*args, "--digits", "10", no_color=no_color)
    assert code == 0, shown
    assert max(len(line) for line in shown.splitlines()) <= 80
    plain = piped(*args, "--digits", "10").stdout
    words = _words(shown)
    heading = " ".join(args[1].split())[:57]  # the heading: the program on one line, cut at 60 characters
    expected = _words(plain) | ({w for w in heading.split()[:-1]} if args[0] != "graph" else set())
    missing = sorted(w for w in expected if w not in words and w != "=")
    assert not missing, f"split across lines: {missing}\n{shown}"
