"""tiktoken 0.14.0's test suite, unmodified, passes with ``import tiktoken`` resolving to bpecore."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parent / "tiktoken_suite"
ROOT = SUITE.parents[1]
N_TESTS = 33


def run_suite(max_examples: int) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["BPECORE_TIKTOKEN_SUITE"] = "1"
    env["TIKTOKEN_MAX_EXAMPLES"] = str(max_examples)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SUITE / "forward"), str(ROOT), env.get("PYTHONPATH", "")]
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-c",
            str(SUITE / "pytest.ini"),
            "--rootdir",
            str(SUITE),
            str(SUITE / "tests"),
        ],
        cwd=SUITE,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


def check(result: subprocess.CompletedProcess) -> None:
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert re.search(rf"\b{N_TESTS} passed\b", summary) and "skipped" not in summary, summary


def test_forwarding_module_is_bpecore():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SUITE / "forward"), str(ROOT)]))
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import tiktoken, bpecore; print(tiktoken is bpecore, tiktoken.Encoding.__module__)",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["True", "bpecore.encoding"]


def test_tiktoken_suite():
    check(run_suite(100))


@pytest.mark.slow
def test_tiktoken_suite_more_examples():
    check(run_suite(2000))
