"""The package's imports flow down its layers (issue 14).

Layers, lowest first: the neutral base (errors, files, text, memory, records, stats), ops, autograd (with the recording tape), lang,
check, render, testing, cli. A module may import its own layer and the ones below, never one above, and never the
package face ``gradcli`` (gradcli/__init__.py, __main__.py and gradcli/functional.py are the face and exempt).
Lazy imports inside functions count as much as the ones at the top of a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gradcli"

LAYERS = ["base", "ops", "autograd", "lang", "check", "render", "testing", "cli"]
RANK = {name: i for i, name in enumerate(LAYERS)}
BASE_MODULES = {"errors", "files", "text", "memory", "records", "stats", "about", "startup"}
FACE = {"gradcli", "gradcli.__main__", "gradcli.functional"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    """The layer a module ``gradcli.<...>`` lives on; None for the package face and for modules outside gradcli."""
    parts = module.split(".")
    if parts[0] != "gradcli" or len(parts) == 1 or module in FACE:
        return None
    head = parts[1]
    if head in BASE_MODULES:
        return "base"
    if head in RANK:
        return head
    raise AssertionError(f"module {module} is on no layer: add it to tests/test_architecture.py")


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path, _module_name(path)


def _imports(path: Path, module: str, source: str | None = None):
    """Every import in the file, at any depth: (line, absolute target module names)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    text = path.read_text(encoding="utf-8") if source is None else source
    tree = ast.parse(text, filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield node.lineno, [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            # `from gradcli import x` may name a submodule (gradcli.x) or a face attribute: resolve what exists.
            targets = []
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").exists() or (
                    PACKAGE.parent / Path(*sub.split(".")) / "__init__.py"
                ).exists()
                targets.append(sub if is_module else source)
            yield node.lineno, targets


def violations(modules=None):
    found = []
    for path, module, *source in modules or _modules():
        here = layer_of(module)
        if here is None:
            continue
        rel = path.relative_to(PACKAGE.parent)
        for line, targets in _imports(path, module, *source):
            for target in dict.fromkeys(targets):  # `import a, b` from one module: said once
                if target == "gradcli":
                    found.append(f"{rel}:{line}: {here} imports the package face `gradcli`")
                    continue
                there = layer_of(target)
                if there is not None and RANK[there] > RANK[here]:
                    found.append(f"{rel}:{line}: {here} imports {target} from the higher layer {there}")
    return found


def test_every_module_is_on_a_layer():
    for _, module in _modules():
        layer_of(module)  # raises for a module on no layer


def test_no_import_runs_up_a_layer_or_into_the_package_face():
    found = violations()
    assert not found, "imports that run up the layers:\n" + "\n".join(found)


def test_the_checker_sees_lazy_relative_absolute_and_face_imports():
    source = (
        "from ..lang import ast\n"  # down: allowed
        "from . import blame\n"  # its own layer: allowed
        "def f():\n"
        "    from ..cli.output import print_json\n"  # lazy, relative, up
        "    import gradcli as gc\n"  # the package face
        "    from gradcli.render import build\n"  # absolute, up (a submodule named in the import list)
        "    from gradcli import testing\n"  # up, through the face's package
        "    import gradcli.autograd.tape\n"  # down: allowed
    )
    path = PACKAGE / "check" / "probe.py"
    assert violations([(path, "gradcli.check.probe", source)]) == [
        "gradcli/check/probe.py:4: check imports gradcli.cli.output from the higher layer cli",
        "gradcli/check/probe.py:5: check imports the package face `gradcli`",
        "gradcli/check/probe.py:6: check imports gradcli.render.build from the higher layer render",
        "gradcli/check/probe.py:7: check imports gradcli.testing from the higher layer testing",
    ]


def test_the_package_face_itself_is_exempt():
    path = PACKAGE / "functional.py"
    assert violations([(path, "gradcli.functional", "from .cli import main\nimport gradcli\n")]) == []


def _classes():
    for path, module in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                yield node.name, layer_of(module) or "face", f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"


def test_no_class_name_means_two_things_across_layers():
    seen: dict[str, tuple[str, str]] = {}
    clashes = []
    for name, layer, where in _classes():
        if name in seen and seen[name][0] != layer:
            clashes.append(f"{name}: {seen[name][1]} ({seen[name][0]}) and {where} ({layer})")
        seen.setdefault(name, (layer, where))
    assert not clashes, "class names defined on two layers:\n" + "\n".join(clashes)


@pytest.mark.parametrize("name", ["Node", "Program", "Function"])
def test_node_program_and_function_are_each_defined_once(name):
    places = [where for found, _, where in _classes() if found == name]
    assert len(places) == 1, places


def test_layers_above_autograd_read_a_tensor_through_its_public_array():
    """``Tensor._value`` is autograd's own; lang, check, render, testing and cli read ``Tensor.array``."""
    found = []
    for path, module in _modules():
        layer = layer_of(module)
        if layer is None or RANK[layer] <= RANK["autograd"]:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "_value":
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    assert not found, found


def test_the_array_accessor_is_the_tensors_own_array_and_read_only():
    import numpy as np

    import gradcli as gc

    x = gc.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    assert y.array is y._value  # not copied
    np.testing.assert_array_equal(y.array, [3.0, 6.0])
    assert gc.tensor(2.5).array == 2.5
    with pytest.raises(AttributeError):
        y.array = np.zeros(2)
