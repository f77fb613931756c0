"""Packaging: the library stands without the service extras; compiled modules and stubs agree;
the docstring examples are true."""

from __future__ import annotations

import ast
import doctest
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bpecore"
COMPILED = sorted(p.stem for p in PACKAGE.glob("*.pyx"))


def test_import_does_not_pull_in_the_service():
    code = "import sys, bpecore; bad = [m for m in ('fastapi', 'uvicorn', 'pydantic', 'tiktoken', 'tokenizers') if m in sys.modules]; print(bad)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", COMPILED)
def test_compiled_module_imports(name):
    importlib.import_module(f"bpecore.{name}")


@pytest.mark.parametrize("name", [p.stem for p in PACKAGE.glob("*.pyi")])
def test_stub_names_exist_in_module(name):
    module = importlib.import_module(f"bpecore.{name}")
    tree = ast.parse((PACKAGE / f"{name}.pyi").read_text())
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            assert hasattr(module, node.name), (
                f"{name}.pyi declares {node.name}, the module lacks it"
            )
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        assert hasattr(cls, item.name), f"{name}.{node.name}.{item.name}"


@pytest.mark.parametrize("name", ["encoding", "registry", "patterns", "interval", "appendable"])
def test_docstring_examples(name):
    module = importlib.import_module(f"bpecore.{name}")
    globs = {"get_encoding": importlib.import_module("bpecore").get_encoding}
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = finder.find(module, globs=globs)
    if name in ("interval", "appendable"):  # compiled: examples live on the classes' docstrings
        tests = []
        for attr in vars(module).values():
            if isinstance(attr, type) and attr.__doc__:
                tests += finder.find(attr, attr.__name__, globs=globs)
                for meth in vars(attr).values():
                    doc = getattr(meth, "__doc__", None)
                    if doc and ">>>" in doc:
                        tests.append(
                            doctest.DocTestParser().get_doctest(doc, globs, attr.__name__, None, 0)
                        )
    assert sum(len(t.examples) for t in tests) > 0
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def _bpecore_imports(path: Path) -> set[str]:
    """The bpecore modules ``path`` imports, at module level or inside functions (not for types only)."""
    found: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            node.body = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] == "bpecore"
        ):
            if node.module == "bpecore":
                found.update(
                    alias.name for alias in node.names if (PACKAGE / f"{alias.name}.py").exists()
                )
            else:
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("bpecore."))
    return found - {path.stem}


def test_python_modules_import_one_way():
    # No import circle among the Python modules (encoding <- registry, export <- encoding, ...):
    # each can be read and imported knowing only the modules below it.
    graph = {p.stem: _bpecore_imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 1:
            raise AssertionError("import circle: " + " -> ".join(path[path.index(name) :] + [name]))
        if state.get(name) == 2 or name not in graph:
            return
        state[name] = 1
        for dep in sorted(graph[name]):
            visit(dep, path + [name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])


@pytest.mark.parametrize(
    "name", sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
)
def test_module_imports_alone(name):
    # bpecore/__init__ not run: the module's own imports must be enough, in any order
    code = (
        "import importlib.util, sys, types\n"
        "pkg = types.ModuleType('bpecore')\n"
        "pkg.__path__ = list(importlib.util.find_spec('bpecore').submodule_search_locations)\n"
        "sys.modules['bpecore'] = pkg\n"
        f"import bpecore.{name}\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
