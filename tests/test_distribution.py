"""What a user installs: exactly the packages bpecore and bpecore_service (every package folder
listed, so none is left out of a wheel), their stubs and py.typed markers, and types that mypy
resolves for a user's script as the package is installed here (README, "Installing")."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def configured_packages() -> tuple[list[str], dict[str, str], dict[str, list[str]]]:
    from setuptools.config.pyprojecttoml import read_configuration

    tool = read_configuration(ROOT / "pyproject.toml")["tool"]["setuptools"]
    return tool["packages"], tool.get("package-dir", {}), tool.get("package-data", {})


def package_folder(name: str, package_dir: dict[str, str]) -> Path:
    top, _, rest = name.partition(".")
    base = ROOT / package_dir.get(top, top)
    return base.joinpath(*rest.split(".")) if rest else base


def test_top_level_packages_are_bpecore_and_bpecore_service():
    packages, package_dir, _ = configured_packages()
    assert {p.split(".")[0] for p in packages} == {"bpecore", "bpecore_service"}
    assert package_dir == {"bpecore_service": "service"}
    for name in packages:
        assert (package_folder(name, package_dir) / "__init__.py").is_file(), name


def test_every_package_folder_is_listed():
    # a sub-package missing from the list would be left out of the wheel (setuptools warns only)
    packages, package_dir, _ = configured_packages()
    found = set()
    for top in ("bpecore", "bpecore_service"):
        base = package_folder(top, package_dir)
        for init in base.rglob("__init__.py"):
            rel = init.parent.relative_to(base)
            if "__pycache__" not in rel.parts and "data" not in rel.parts:
                found.add(".".join((top, *rel.parts)))
    assert found == set(packages)


def test_typing_markers_and_stubs_are_package_data():
    packages, package_dir, package_data = configured_packages()
    for top in ("bpecore", "bpecore_service"):
        assert "py.typed" in package_data.get(top, []), top
        assert (package_folder(top, package_dir) / "py.typed").is_file(), top
    assert "*.pyi" in package_data["bpecore"]
    compiled = {p.stem for p in (ROOT / "bpecore").glob("*.pyx")}
    stubs = {p.stem for p in (ROOT / "bpecore").glob("*.pyi")}
    assert compiled <= stubs, f"compiled modules without a stub: {sorted(compiled - stubs)}"


USER_SCRIPT = """\
import bpecore
from bpecore.interval import IntervalCounter
from bpecore_service.config import Settings
from bpecore_service.main import create_app

enc = bpecore.get_encoding("cl100k_base")
n: int = enc.count("hello world")
k: int = enc.split_at("hello world", 1)
chunks: list[bpecore.Chunk] = bpecore.chunk("hello world", enc, max_tokens=5)
counter: IntervalCounter = enc.interval_counter("hello world")
app = create_app(Settings(max_texts=4))
"""


def run_mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    """mypy on ``source`` as a user's script outside the repository: bpecore and bpecore_service
    found only as installed in this environment (no PYTHONPATH, another working directory)."""
    script = tmp_path / "user_app.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            str(script),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_mypy_resolves_the_installed_packages(tmp_path):
    pytest.importorskip("mypy")
    hint = (
        "mypy cannot follow setuptools' import-hook editable install: "
        "pip install --config-settings editable_mode=strict -e . (README, Installing)"
    )
    if any(name.startswith("__editable___bpecore") for name in sys.modules):
        pytest.skip(hint)  # the README's test command installs in strict mode, as CI does
    result = run_mypy(tmp_path, USER_SCRIPT)
    for problem in ("import-not-found", "import-untyped", "missing library stubs"):
        assert problem not in result.stdout, f"{hint}\n{result.stdout}"
    assert result.returncode == 0, result.stdout + result.stderr
    # and the types are the stubs' own, not Any: a wrong use is an error
    wrong = USER_SCRIPT + 'bad: str = enc.count("x")\nenc.split_at("x", "1")\n'
    result = run_mypy(tmp_path, wrong)
    assert result.returncode == 1
    assert (
        'Incompatible types in assignment (expression has type "int", variable has type "str")'
        in result.stdout
    )
    assert 'Argument 2 to "split_at" of "Encoding" has incompatible type "str"' in result.stdout


@pytest.mark.slow
def test_wheel_from_the_sdist_holds_exactly_the_two_packages(tmp_path):
    """A real sdist, then a wheel built from it as pip builds one from PyPI (minutes: the Cython
    core compiles): the sdist carries the Cython sources and no generated C++, the wheel its
    top-level entries, every extension (the chunker's too) and no C++ either."""
    subprocess.run(
        [sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "sdist")],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=1800,
    )
    (sdist,) = (tmp_path / "sdist").glob("bpecore-*.tar.gz")
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    pyx = {f"bpecore/{p.name}" for p in (ROOT / "bpecore").glob("*.pyx")}
    assert pyx and pyx <= members, pyx - members
    assert {"bpecore/chunker.py", "bpecore/chunker.pxd", "setup.py"} <= members
    assert not [m for m in members if m.endswith((".cpp", ".so"))]
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(sdist), "-w", str(tmp_path)],
        check=True,
        timeout=1800,
    )
    (wheel,) = tmp_path.glob("bpecore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    from bpecore import __version__

    assert tops == {"bpecore", "bpecore_service", f"bpecore-{__version__}.dist-info"}, tops
    for required in (
        "bpecore/py.typed",
        "bpecore_service/py.typed",
        "bpecore/vocab.pyi",
        "bpecore/integrations/langchain.py",
        "bpecore_service/routes/__init__.py",
        "bpecore_service/static/playground.html",
    ):
        assert required in names, required
    for module in [p.stem for p in (ROOT / "bpecore").glob("*.pyx")] + ["chunker"]:
        assert any(n.startswith(f"bpecore/{module}.") and n.endswith(".so") for n in names), module
    assert not [n for n in names if n.endswith(".cpp")]
