"""The ``bpecore`` command: count, encode, chunk; stdin; errors; progress bar."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

import bpecore
from bpecore import cli
from bpecore.chunker import chunk

TEXT = "Hello world. This is a test.\n\nSecond paragraph, with a few more words in it.\n"


@pytest.fixture
def enc():
    return bpecore.get_encoding("cl100k_base")


@pytest.fixture
def files(tmp_path):
    a = tmp_path / "a.txt"
    a.write_text(TEXT, encoding="utf-8")
    b = tmp_path / "b.txt"
    b.write_text("日本語のテキスト。😀", encoding="utf-8")
    return a, b


def run(capsys, argv, stdin: bytes | None = None, monkeypatch=None):
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_count_files_and_total(capsys, files, enc):
    a, b = files
    code, out, _ = run(capsys, ["count", str(a), str(b)])
    assert code == 0
    assert out.splitlines() == [
        f"{enc.count(TEXT)}\t{a}",
        f"{enc.count(b.read_text('utf-8'))}\t{b}",
        f"{enc.count(TEXT) + enc.count(b.read_text('utf-8'))}\ttotal",
    ]


def test_count_stdin_and_encoding(capsys, monkeypatch):
    code, out, _ = run(
        capsys, ["count", "--encoding", "o200k_base"], stdin=TEXT.encode(), monkeypatch=monkeypatch
    )
    assert code == 0 and out == f"{bpecore.get_encoding('o200k_base').count(TEXT)}\n"


def test_count_missing_file_reports_and_continues(capsys, files, tmp_path):
    a, _ = files
    code, out, err = run(capsys, ["count", str(tmp_path / "nope.txt"), str(a)])
    assert code == 1 and "nope.txt" in err and str(a) in out


def test_not_utf8(capsys, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"abc\xff")
    code, _, err = run(capsys, ["count", str(bad)])
    assert code == 1 and "not UTF-8" in err


def test_unknown_encoding(capsys, files):
    code, _, err = run(capsys, ["count", "-e", "nope_base", str(files[0])])
    assert code == 1 and "nope_base" in err


def test_encode(capsys, files, enc):
    code, out, _ = run(capsys, ["encode", str(files[0])])
    assert code == 0 and list(map(int, out.split())) == enc.encode_ordinary(TEXT)
    code, out, _ = run(capsys, ["encode", "--json", str(files[0])])
    assert json.loads(out) == enc.encode_ordinary(TEXT)


def test_chunk_jsonl_equals_library(capsys, files, enc):
    code, out, _ = run(capsys, ["chunk", str(files[0]), "--max-tokens", "8", "--jsonl"])
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = chunk(TEXT, enc, 8)
    assert [(r["start"], r["end"], r["tokens"], r["text"]) for r in rows] == [
        (c.start, c.end, c.tokens, c.text) for c in expected
    ]
    assert [r["index"] for r in rows] == list(range(len(rows)))


def test_chunk_options(capsys, files, enc, monkeypatch):
    argv = [
        "chunk",
        "-n",
        "10",
        "--overlap",
        "3",
        "--no-trim",
        "--markdown",
        "-e",
        "o200k_base",
        "--jsonl",
    ]
    code, out, _ = run(capsys, argv, stdin=TEXT.encode(), monkeypatch=monkeypatch)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    o200k = bpecore.get_encoding("o200k_base")
    expected = chunk(TEXT, o200k, 10, overlap=3, trim=False, markdown=True)
    assert [(r["start"], r["end"]) for r in rows] == [(c.start, c.end) for c in expected]


def test_chunk_plain_output(capsys, files):
    code, out, _ = run(capsys, ["chunk", str(files[0]), "-n", "8"])
    assert code == 0 and out.startswith(
        "--- chunk 0: chars 0-28, 8 tokens ---\nHello world. This is a test.\n"
    )


def test_chunk_progress_bar_on_stderr(capsys, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("word " * 20_000, encoding="utf-8")
    code, out, err = run(capsys, ["chunk", str(big), "-n", "64", "--jsonl", "--progress"])
    assert code == 0 and "100%" in err and "#" in err
    code, out, err = run(capsys, ["chunk", str(big), "-n", "64", "--jsonl"])
    assert err == ""  # not a terminal and not forced


@pytest.mark.parametrize(
    "argv",
    [
        ["chunk", "x.txt"],
        ["chunk", "x.txt", "-n", "0"],
        ["chunk", "x.txt", "-n", "4", "--overlap", "-1"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2


def test_overlap_not_below_max_tokens(capsys, files):
    code, _, err = run(capsys, ["chunk", str(files[0]), "-n", "4", "--overlap", "4"])
    assert code == 1 and "overlap" in err


def test_unfittable_character_is_a_clean_error(capsys, files):
    code, _, err = run(capsys, ["chunk", str(files[1]), "-n", "1"])
    assert code == 1 and "cannot hold" in err


def test_subcommands_are_pluggable():
    assert [f.__name__ for f in cli._SUBCOMMANDS] == [
        "_add_count",
        "_add_encode",
        "_add_chunk",
        "_add_train",
        "_add_serve",
    ]
    help_text = cli.build_parser().format_help()
    assert all(name in help_text for name in ("count", "encode", "chunk", "train", "serve"))


def test_module_entry_point(files):
    proc = subprocess.run(
        [sys.executable, "-m", "bpecore.cli", "count", str(files[0])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0 and proc.stdout.split("\t")[0] == str(
        bpecore.get_encoding("cl100k_base").count(TEXT)
    )


def test_train_subcommand_delegates(tmp_path, capsys):
    from bpecore import cli

    corpus = tmp_path / "c.txt"
    corpus.write_text("hello world, hello there. " * 200 + "\nthe end\n")
    assert (
        cli.main(
            [
                "train",
                str(corpus),
                "--vocab-size",
                "300",
                "--pattern",
                "o200k",
                "-o",
                str(tmp_path / "out"),
                "--quiet",
            ]
        )
        == 0
    )
    assert any(p.suffix == ".tiktoken" for p in (tmp_path / "out").iterdir())


def test_serve_is_listed():
    from bpecore import cli

    text = cli.build_parser().format_help()
    assert "serve" in text and "train" in text
