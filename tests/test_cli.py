"""The ``bpecore`` command: count, encode, chunk; stdin; errors; progress bar."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
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


def test_chunk_language(capsys, monkeypatch):
    code_text = "import os\n\n\ndef first(x):\n    return x + 1\n\n\nclass Second:\n    def method(self):\n        return first(2)\n"
    argv = ["chunk", "-n", "12", "--language", "python", "--jsonl"]
    code, out, _ = run(capsys, argv, stdin=code_text.encode(), monkeypatch=monkeypatch)
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    expected = chunk(code_text, "cl100k_base", 12, language="python")
    assert [(r["start"], r["end"]) for r in rows] == [(c.start, c.end) for c in expected]
    assert [r["text"].split("\n")[0] for r in rows][1:] == [
        "def first(x):",
        "class Second:",
        "def method(self):",
    ]


def test_chunk_balance(capsys, monkeypatch):
    line = " ".join(f"Sentence number {i} says something about item {i * 7}." for i in range(40))
    argv = ["chunk", "-n", "100", "--balance", "--jsonl"]
    code, out, _ = run(capsys, argv, stdin=line.encode(), monkeypatch=monkeypatch)
    assert code == 0
    rows = [json.loads(row) for row in out.splitlines()]
    expected = chunk(line, "cl100k_base", 100, balance=True)
    assert [(r["start"], r["end"]) for r in rows] == [(c.start, c.end) for c in expected]
    assert expected != chunk(line, "cl100k_base", 100)


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
                "265",
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


# ------------------------------------------------------------------------------ user errors
def one_line_error(err: str) -> str:
    """The single stderr line a user error prints (never a traceback)."""
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("hello world, hello there. " * 200 + "\nthe end\n", encoding="utf-8")
    return path


def train_argv(tmp_path, *files, extra=()):
    return ["train", *map(str, files), "-o", str(tmp_path / "out"), "--quiet", *extra]


def test_train_missing_file(capsys, tmp_path, corpus):
    code, _, err = run(capsys, train_argv(tmp_path, corpus, tmp_path / "nope.txt"))
    assert code == cli.EXIT_INPUT == 1
    assert (
        one_line_error(err) == f"bpecore train: {tmp_path / 'nope.txt'}: No such file or directory"
    )
    assert not (tmp_path / "out").exists()  # refused before training


def test_train_unreadable_file(capsys, tmp_path, corpus):
    code, _, err = run(capsys, train_argv(tmp_path, tmp_path))  # a directory
    assert code == 1 and "Is a directory" in one_line_error(err)
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.txt"
        locked.write_text("text")
        locked.chmod(0)
        code, _, err = run(capsys, train_argv(tmp_path, locked))
        assert code == 1 and "Permission denied" in one_line_error(err)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_train_binary_input(capsys, tmp_path, gz):
    data = random.Random(0).randbytes(50_000)
    path = tmp_path / ("random.bin.gz" if gz else "random.bin")
    path.write_bytes(gzip.compress(data) if gz else data)
    code, _, err = run(capsys, train_argv(tmp_path, path))
    line = one_line_error(err)
    assert code == 1 and str(path) in line and ("binary" in line or "not UTF-8" in line)


def test_train_text_with_nul_is_binary(capsys, tmp_path):
    path = tmp_path / "nul.txt"
    path.write_bytes(b"looks like text\x00 but is not")
    code, _, err = run(capsys, train_argv(tmp_path, path))
    assert code == 1 and "NUL byte at offset 15" in one_line_error(err)


def test_train_bad_regex(capsys, tmp_path, corpus):
    code, _, err = run(capsys, train_argv(tmp_path, corpus, extra=["--pattern", "([a-z]+"]))
    assert code == cli.EXIT_USAGE == 2
    assert one_line_error(err).startswith("bpecore train: --pattern '([a-z]+' is not a valid regex")


def test_train_vocab_size_too_small(capsys, tmp_path, corpus):
    code, _, err = run(capsys, train_argv(tmp_path, corpus, extra=["--vocab-size", "200"]))
    assert code == 2
    assert one_line_error(err) == (
        "bpecore train: --vocab-size 200 is too small: the 256 byte tokens and 1 special "
        "token(s) need 257"
    )


def test_train_vocab_size_unreachable(capsys, tmp_path, corpus):
    code, out, err = run(capsys, train_argv(tmp_path, corpus, extra=["--vocab-size", "500000"]))
    assert code == cli.EXIT_SHORT_VOCAB == 5
    line = one_line_error(err)
    n_vocab = bpecore.load_tiktoken(tmp_path / "out" / "out.tiktoken").n_vocab
    assert line.startswith(f"bpecore train: {n_vocab} ids, not the 500000 asked")
    assert n_vocab < 1000 and f"{n_vocab} ids" in out  # written, and the summary says how many


def test_train_holdout_off_unless_asked(capsys, tmp_path, corpus):
    code, out, err = run(capsys, train_argv(tmp_path, corpus, extra=["--vocab-size", "265"]))
    assert code == 0 and err == ""
    assert "held-out: none, trained on all the input" in out
    assert f"input {corpus.stat().st_size / 1e6:.1f} MB" in out
    code, out, _ = run(
        capsys,
        train_argv(tmp_path, corpus, extra=["--vocab-size", "265", "--holdout-bytes", "500"]),
    )
    assert code == 0 and "held-out 1 KB" not in out and "held-out 0 KB" in out
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    assert "default 0: train on all the input" in " ".join(capsys.readouterr().out.split())


def test_count_binary_and_missing_are_one_line(capsys, tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(random.Random(1).randbytes(4096))
    code, _, err = run(capsys, ["count", str(path)])
    assert code == 1 and "not UTF-8 text" in one_line_error(err)
    code, _, err = run(capsys, ["encode", str(tmp_path / "missing.txt")])
    assert code == 1 and one_line_error(err).endswith("missing.txt: No such file or directory")
    code, _, err = run(capsys, ["chunk", str(tmp_path), "-n", "5"])
    assert code == 1 and "Is a directory" in one_line_error(err)


def cli_subprocess(*argv: str, env: dict | None = None, timeout: float = 60):
    return subprocess.Popen(
        [sys.executable, "-m", "bpecore.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None},
    )


def test_serve_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        proc = cli_subprocess("serve", "--port", str(port))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == cli.EXIT_LISTEN == 4
    assert one_line_error(err) == (
        f"bpecore serve: cannot listen on 127.0.0.1:{port}: Address already in use "
        "(another process uses it; pick one with --port)"
    )


def test_serve_unknown_host():
    proc = cli_subprocess("serve", "--host", "no-such-host.invalid", "--port", "8000")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 4
    assert one_line_error(err).startswith("bpecore serve: cannot listen on no-such-host.invalid")


def test_serve_binds_loopback_by_default():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = cli_subprocess("serve", "--port", str(port), env={"BPESVC_HOST": None})
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        listening = {
            line.split()[1]
            for line in open("/proc/net/tcp").read().splitlines()[1:]
            if line.split()[3] == "0A"  # LISTEN
        }
        # /proc/net/tcp: little-endian hex address, then the port
        assert f"0100007F:{port:04X}" in listening
        assert f"00000000:{port:04X}" not in listening
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_python_m_service_listens_on_loopback_by_default(monkeypatch):
    pytest.importorskip("pydantic_settings")
    from bpecore_service.config import Settings

    monkeypatch.delenv("BPESVC_HOST", raising=False)
    assert Settings().host == "127.0.0.1"
    monkeypatch.setenv("BPESVC_HOST", "0.0.0.0")
    assert Settings().host == "0.0.0.0"


def test_container_and_manifests_listen_on_every_interface():
    root = Path(__file__).resolve().parents[1]
    dockerfile = (root / "Dockerfile").read_text()
    cmd = json.loads([line for line in dockerfile.splitlines() if line.startswith("CMD ")][-1][4:])
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"
    assert (
        "BPESVC_HOST=0.0.0.0" in dockerfile
    )  # `bpecore serve` / `python -m bpecore_service` in the image
    yaml = pytest.importorskip("yaml")
    for path in sorted((root / "deploy").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec", {})
            pod = spec.get("template", {}).get("spec", spec)
            for c in pod.get("containers", []) + pod.get("initContainers", []):
                if c.get("image", "").startswith("bpecore-service"):
                    env = {e["name"]: e.get("value") for e in c.get("env", [])}
                    assert env.get("BPESVC_HOST") == "0.0.0.0", (path.name, c["name"])
                    assert "command" not in c and "args" not in c  # the image's CMD


def test_serve_bad_setting():
    proc = cli_subprocess("serve", env={"BPESVC_PORT": "eighty"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert one_line_error(err).startswith("bpecore serve: bad setting: BPESVC_PORT: ")


def test_serve_encodings_fail_to_load(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    missing = str(tmp_path / "missing.tiktoken")
    proc = cli_subprocess(
        "serve", "--port", str(port), env={"BPESVC_ENCODINGS": json.dumps([missing])}
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == cli.EXIT_LOAD == 3
    assert "Traceback" not in out + err and "missing.tiktoken" in out + err
