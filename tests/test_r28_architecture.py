"""One road per job (issue 28): the package's shape, measured from its own source.

- no function over complexity 25 as radon counts it (boolean operands and comprehension clauses
  included: stricter than ruff's C901, which tests/test_architecture_size.py applies), its closures'
  decisions counted as its own (a reader reads them as one function: radon scores a closure apart);
- no module imports another module's private (``_name``) names;
- no import circle inside a layer (``gradcli.lang`` with its subpackages), counting imports inside functions (the Tensor and the engine
  may know each other: ``Tensor.backward`` calls the engine, the engine makes Tensors);
- an import of gradcli's own modules inside a function stays only where it buys start-up time,
  and says so on its line (``# lazy: ...``);
- no run of six or more identical lines stands in two places of the package.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradcli"
MAX_COMPLEXITY = 25
#: the one circle allowed inside a package
TENSOR_AND_ENGINE = {"gradcli.autograd.tensor", "gradcli.autograd.engine"}
RUN = 6  # lines that make a repeated block


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module(p): p for p in _sources()}


def _package(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _target(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = _package(module).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


class _Imports(ast.NodeVisitor):
    """Every import of gradcli's own modules in one file: (line, importing module, imported module,
    names taken, inside a function?), leaving out ``if TYPE_CHECKING:`` blocks."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.found: list[tuple[int, str, list[str], bool]] = []
        self._depth = 0

    def visit_FunctionDef(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        source = _target(self.module, node)
        if source.split(".")[0] != "gradcli":
            return
        for alias in node.names:
            sub = f"{source}.{alias.name}"
            module, name = (sub, None) if sub in MODULES else (source, alias.name)
            self.found.append((node.lineno, module, [name] if name else [], self._depth > 0))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "gradcli":
                self.found.append((node.lineno, alias.name, [], self._depth > 0))


@cache
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for the scans below (the trees are read, never changed)."""
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imports() -> dict[str, list[tuple[int, str, list[str], bool]]]:
    found = {}
    for module, path in MODULES.items():
        visitor = _Imports(module)
        visitor.visit(_tree(path))
        found[module] = visitor.found
    return found


IMPORTS = _imports()


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def test_no_function_is_more_complex_than_25_as_radon_counts():
    radon = pytest.importorskip("radon.complexity", reason="radon is in the test extras: pip install -e '.[test]'")
    over = []
    for path in _sources():
        blocks = radon.cc_visit(path.read_text(encoding="utf-8"))
        stack = list(blocks)
        while stack:
            block = stack.pop()
            stack.extend(getattr(block, "methods", []))
            complexity = _with_closures(block)
            if complexity > MAX_COMPLEXITY and not hasattr(block, "methods"):
                over.append(f"{path.relative_to(PACKAGE.parent)}:{block.lineno} {block.fullname} ({complexity})")
    assert not sorted(set(over)), "functions over complexity 25 (split them into steps):\n" + "\n".join(
        sorted(set(over))
    )


def _with_closures(block) -> int:
    """radon's complexity of a function with its closures' decisions added (a closure's own base 1 is
    not a decision of the function's)."""
    return block.complexity + sum(_with_closures(c) - 1 for c in getattr(block, "closures", []))


def test_a_closures_decisions_count_as_its_functions():
    radon = pytest.importorskip("radon.complexity", reason="radon is in the test extras: pip install -e '.[test]'")
    source = "def f(a):\n    def g(b):\n        return 1 if b else 2\n    return g(a) if a else 0\n"
    (block,) = radon.cc_visit(source)
    assert (block.complexity, _with_closures(block)) == (2, 3)


def _private_uses() -> list[str]:
    found = []
    for module, imports in IMPORTS.items():
        for line, target, names, _ in imports:
            if target != module:
                found += [f"{_where(module, line)} takes {n} from {target}" for n in names if _private(n)]
    for module, path in MODULES.items():  # `from . import build` ... `build._expression`
        tree = _tree(path)
        bound = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _target(module, node)
                for alias in node.names:
                    if f"{source}.{alias.name}" in MODULES:
                        bound[alias.asname or alias.name] = f"{source}.{alias.name}"
        for node in ast.walk(tree):
            named = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
            if named and _private(node.attr) and bound[node.value.id] != module:
                found.append(f"{_where(module, node.lineno)} reads {node.value.id}.{node.attr}")
    return found


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_no_module_takes_another_modules_private_names():
    found = _private_uses()
    assert not found, "private names used across modules (make the helper public where it belongs):\n" + "\n".join(
        found
    )


def _layer(module: str) -> str:
    """``gradcli.lang`` for gradcli.lang.frameworks.function: the layer, subpackages included."""
    return ".".join(module.split(".")[:2])


def circles() -> list[set[str]]:
    """Strongly connected sets of two or more modules of one layer, every import counted."""
    edges = defaultdict(set)
    for module, imports in IMPORTS.items():
        for _, target, _, _ in imports:
            if target in MODULES and target != module and _layer(target) == _layer(module):
                edges[module].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for start in MODULES:  # Tarjan's algorithm, iteratively (principle 5: never recurse over a graph)
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    work.append((succ, iter(sorted(edges[succ]))))
                    break
                if succ in stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    member = set()
                    while True:
                        top = stack.pop()
                        member.add(top)
                        if top == node:
                            break
                    if len(member) > 1:
                        found.append(member)
    return found


def test_a_circle_through_a_subpackage_is_seen():
    """lang/program.py and lang/frameworks/function.py once imported each other unseen: the two
    sit in different packages of one layer."""
    assert _layer("gradcli.lang.frameworks.function") == _layer("gradcli.lang.program") == "gradcli.lang"


def test_no_import_circle_inside_a_package():
    bad = [sorted(c) for c in circles() if not c <= TENSOR_AND_ENGINE]
    assert not bad, "import circles inside a package (move the shared helper down):\n" + "\n".join(map(str, bad))


def test_the_language_never_imports_what_the_commands_compute():
    """lang is text -> tree -> tensors; lang/compute/ (gradients, matrices, SymPy derivatives, points)
    sits on top of it, below check: no other module of lang imports it, lazily or not."""
    compute = "gradcli.lang.compute"
    found = [
        f"{_where(module, line)} imports {target}"
        for module, imports in IMPORTS.items()
        if module.startswith("gradcli.lang") and not module.startswith(compute)
        for line, target, _, _ in imports
        if target == compute or target.startswith(compute + ".")
    ]
    assert not found, "lang imports lang/compute (move the helper down into lang):\n" + "\n".join(found)


def test_an_import_inside_a_function_says_why_it_is_lazy():
    lines = {m: p.read_text(encoding="utf-8").splitlines() for m, p in MODULES.items()}
    silent = [
        _where(module, line)
        for module, imports in IMPORTS.items()
        for line, _, _, inside in imports
        if inside and "# lazy:" not in lines[module][line - 1]
    ]
    assert not silent, "imports inside functions without a '# lazy: reason' (or move them to the top):\n" + "\n".join(
        sorted(set(silent))
    )


def _meaningful(lines: list[str]) -> list[tuple[int, str]]:
    """The file's lines that carry code: not blank, not a comment, not a lone bracket or keyword."""
    kept = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if text and not text.startswith("#") and len(text) > 3 and text not in ("else:", "try:", "pass", "return"):
            kept.append((number, " ".join(text.split())))
    return kept


def repeated_blocks(run: int = RUN) -> list[str]:
    """Places where ``run`` consecutive lines of code stand identically somewhere else in the package."""
    seen: dict[tuple[str, ...], str] = {}
    found = []
    for path in _sources():
        kept = _meaningful(path.read_text(encoding="utf-8").splitlines())
        last = -run
        for i in range(len(kept) - run + 1):
            window = tuple(text for _, text in kept[i : i + run])
            here = f"{path.relative_to(PACKAGE.parent)}:{kept[i][0]}"
            if window in seen and i >= last + run:
                found.append(f"{here} repeats {seen[window]}")
                last = i
            seen.setdefault(window, here)
    return found


def test_no_block_of_six_lines_is_repeated():
    found = repeated_blocks()
    assert not found, "blocks of six or more identical lines (share one piece of code):\n" + "\n".join(found)


def test_the_measures_catch_what_they_should(tmp_path):
    text = "a = f(1)\nb = g(a)\nc = h(b)\nd = i(c)\ne = j(d)\nk = l(e)\n"
    assert _meaningful(text.splitlines()) == [(i + 1, line) for i, line in enumerate(text.splitlines())]
    assert _private("_expression") and not _private("__all__") and not _private("expression")
    tree = ast.parse("def f():\n    from .views import compact\n    from ..lang import parser\nimport numpy\n")
    visitor = _Imports("gradcli.render.page")
    visitor.visit(tree)
    assert visitor.found == [(2, "gradcli.render.views", ["compact"], True), (3, "gradcli.lang.parser", [], True)]
