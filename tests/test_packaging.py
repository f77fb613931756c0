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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
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
            assert hasattr(module, node.name), f"{name}.pyi declares {node.name}, the module lacks it"
            if isinstance(node, ast.ClassDef):
                cls = getattr(module, node.name)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                        assert hasattr(cls, item.name), f"{name}.{node.name}.{item.name}"


@pytest.mark.parametrize("name", ["encoding", "registry", "interval", "appendable"])
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
                        tests.append(doctest.DocTestParser().get_doctest(doc, globs, attr.__name__, None, 0))
    assert sum(len(t.examples) for t in tests) > 0
    for t in tests:
        runner.run(t)
    assert runner.failures == 0
