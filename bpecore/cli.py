"""The ``bpecore`` command: ``count``, ``encode``, ``chunk``, ``train``, ``serve``.

Each subcommand is one ``_add_<name>(subparsers)`` function that builds its parser and sets
``func`` to a handler ``(args) -> exit code``; ``_SUBCOMMANDS`` lists them in help order, so a new
subcommand is one function and one list entry. Files are read as UTF-8; with no file, stdin is read.

A user error is one line on stderr (``bpecore: ...``) and an exit code, never a traceback; the
codes are the ``EXIT_*`` constants of ``bpecore._exitcodes`` (a table in the README, "Command
line"). A handler raises ``CLIError(message, code)``; ``main`` prints it.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import socket
import sys
from collections.abc import Callable

# the exit codes, here too for users of the command (``cli.EXIT_USAGE``)
from bpecore._exitcodes import EXIT_INPUT as EXIT_INPUT
from bpecore._exitcodes import EXIT_LISTEN, EXIT_OK, EXIT_USAGE, CLIError
from bpecore._exitcodes import EXIT_LOAD as EXIT_LOAD
from bpecore._exitcodes import EXIT_SHORT_VOCAB as EXIT_SHORT_VOCAB
from bpecore._progress import Progress

DEFAULT_ENCODING = "cl100k_base"
PROGRESS_MIN_CHARS = 1 << 20  # show a progress bar for inputs at least this long (on a terminal)
SERVE_HOST = "127.0.0.1"  # `bpecore serve` listens on loopback unless told otherwise


class _InputError(CLIError):
    pass


def _read(path: str | None) -> str:
    """The text of ``path`` (``None`` or ``-``: stdin), decoded as strict UTF-8."""
    try:
        if path is None or path == "-":
            data = sys.stdin.buffer.read()
            path = "<stdin>"
        else:
            with open(path, "rb") as f:
                data = f.read()
        return data.decode("utf-8")
    except OSError as e:
        raise _InputError(f"bpecore: {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise _InputError(
            f"bpecore: {path}: not UTF-8 text (byte {e.start}: {e.reason}); binary input is refused"
        ) from None


def _encoding(name: str):
    """The encoding ``-e`` names: a name ``get_encoding`` knows, or a vocab file (``resolve_encoding``)."""
    from bpecore.registry import resolve_encoding

    try:
        return resolve_encoding(name)
    except (KeyError, ValueError) as e:
        raise _InputError(f"bpecore: {e}") from None
    except OSError as e:
        raise _InputError(f"bpecore: {name}: {e.strerror or e}") from None


def _want_progress(flag: bool | None, n_chars: int) -> bool:
    if flag is not None:
        return flag
    return n_chars >= PROGRESS_MIN_CHARS and sys.stderr.isatty()


# ------------------------------------------------------------------------------ count
def _add_count(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "count",
        help="count tokens of files (or stdin)",
        description="Exact token counts, one line per file, then a total.",
    )
    p.add_argument(
        "files", nargs="*", metavar="FILE", help="UTF-8 text files; none or '-' reads stdin"
    )
    _encoding_option(p)
    p.set_defaults(func=_run_count)


def _run_count(args: argparse.Namespace) -> int:
    enc = _encoding(args.encoding)
    if not args.files:
        print(enc.count(_read(None)))
        return 0
    status, total = 0, 0
    for path in args.files:
        try:
            n = enc.count(_read(path))
        except _InputError as e:
            print(e, file=sys.stderr)
            status = 1
            continue
        total += n
        print(f"{n}\t{path}")
    if len(args.files) > 1:
        print(f"{total}\ttotal")
    return status


# ------------------------------------------------------------------------------ encode
def _add_encode(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "encode",
        help="print token ids of a file (or stdin)",
        description="Token ids, space-separated, on one line.",
    )
    p.add_argument(
        "file", nargs="?", metavar="FILE", help="a UTF-8 text file; none or '-' reads stdin"
    )
    _encoding_option(p)
    p.add_argument("--json", action="store_true", help="print a JSON array instead")
    p.set_defaults(func=_run_encode)


def _run_encode(args: argparse.Namespace) -> int:
    enc = _encoding(args.encoding)
    ids = enc.encode_ordinary(_read(args.file))
    print(json.dumps(ids) if args.json else " ".join(map(str, ids)))
    return 0


# ------------------------------------------------------------------------------ chunk
def _add_chunk(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chunk",
        help="split a file (or stdin) into chunks of at most N tokens",
        description="Chunks of at most --max-tokens tokens each (exact), ending at the best boundary available.",
    )
    p.add_argument(
        "file", nargs="?", metavar="FILE", help="a UTF-8 text file; none or '-' reads stdin"
    )
    p.add_argument(
        "--max-tokens",
        "-n",
        type=_positive_int,
        required=True,
        metavar="N",
        help="most tokens per chunk",
    )
    p.add_argument(
        "--overlap",
        type=_non_negative_int,
        default=0,
        metavar="K",
        help="tokens each chunk may repeat from the previous one (default 0)",
    )
    p.add_argument("--markdown", action="store_true", help="prefer cuts before Markdown headings")
    from bpecore.chunker import LANGUAGES

    p.add_argument(
        "--language",
        choices=LANGUAGES,
        help="cut source code at definitions and blocks (or Markdown at headings)",
    )
    p.add_argument(
        "--balance",
        action="store_true",
        help="share a long line evenly between its chunks instead of filling each",
    )
    p.add_argument(
        "--no-trim",
        dest="trim",
        action="store_false",
        help="keep whitespace at chunk edges (chunks then tile the text)",
    )
    p.add_argument(
        "--jsonl",
        action="store_true",
        help="one JSON object per chunk: index, start, end, tokens, text",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: for inputs over 1M chars on a terminal)",
    )
    _encoding_option(p)
    p.set_defaults(func=_run_chunk)


def _run_chunk(args: argparse.Namespace) -> int:
    from bpecore.chunker import _iter_chunks

    if args.overlap >= args.max_tokens:
        raise _InputError(
            f"bpecore: --overlap ({args.overlap}) must be less than --max-tokens ({args.max_tokens})"
        )
    enc = _encoding(args.encoding)
    text = _read(args.file)
    progress = (
        Progress("chunk", max(len(text), 1), "M chars", 1e6)
        if _want_progress(args.progress, len(text))
        else None
    )
    out = sys.stdout
    try:
        for i, c in enumerate(
            _iter_chunks(
                text,
                enc,
                args.max_tokens,
                args.overlap,
                args.trim,
                args.markdown,
                args.language,
                args.balance,
            )
        ):
            if args.jsonl:
                out.write(
                    json.dumps(
                        {
                            "index": i,
                            "start": c.start,
                            "end": c.end,
                            "tokens": c.tokens,
                            "text": c.text,
                        },
                        ensure_ascii=False,
                    )
                )
                out.write("\n")
            else:
                out.write(
                    f"--- chunk {i}: chars {c.start}-{c.end}, {c.tokens} tokens ---\n{c.text}\n"
                )
            if progress:
                progress(c.end)
    except ValueError as e:
        raise _InputError(f"bpecore: {e}") from None
    if progress:
        progress.close(len(text))
    return 0


# ------------------------------------------------------------------------------ plumbing
def _encoding_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--encoding",
        "-e",
        default=DEFAULT_ENCODING,
        help=f"encoding name, or a vocab file: .tiktoken (with its sidecar) or tokenizer.json (default {DEFAULT_ENCODING})",
    )


def _positive_int(s: str) -> int:
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _port(s: str) -> int:
    v = int(s)
    if not 1 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"must be 1-65535, got {v}")
    return v


def _non_negative_int(s: str) -> int:
    v = int(s)
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def _add_serve(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the HTTP service (needs the [service] extra)",
        description="Serve the HTTP API with uvicorn. Listens on 127.0.0.1 unless --host (or "
        "BPESVC_HOST) says otherwise: --host 0.0.0.0 listens on every interface.",
    )
    p.add_argument(
        "--host",
        help=f"interface to listen on (default: BPESVC_HOST or {SERVE_HOST}; 0.0.0.0: every interface)",
    )
    p.add_argument("--port", type=_port, help="port, 1-65535 (default: BPESVC_PORT or 8000)")
    p.add_argument(
        "--workers",
        type=_positive_int,
        help="uvicorn worker processes (default: BPESVC_WORKERS or 1)",
    )
    p.set_defaults(func=_run_serve)


def _check_listen(host: str, port: int) -> None:
    """Raise ``CLIError`` (``EXIT_LISTEN``) if ``host:port`` cannot be bound, as uvicorn binds it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, addr = infos[0]
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(addr)
    except OSError as e:
        hint = (
            " (another process uses it; pick one with --port)"
            if e.errno == errno.EADDRINUSE
            else ""
        )
        raise CLIError(
            f"bpecore serve: cannot listen on {host}:{port}: {e.strerror or e}{hint}", EXIT_LISTEN
        ) from None


def _run_serve(args: argparse.Namespace) -> int:
    try:
        from bpecore_service.config import get_settings

        settings = get_settings()  # cached: read once, here, so a bad variable is one line
        from bpecore_service.main import run
    except ImportError as e:
        raise _InputError(
            f"bpecore serve needs the service extra: pip install 'bpecore[service]' ({e})"
        ) from None
    except ValueError as e:  # a BPESVC_ variable that does not parse
        errors = e.errors() if hasattr(e, "errors") else []
        what = "; ".join(
            f"BPESVC_{str(x['loc'][0]).upper() if x.get('loc') else '?'}: {x['msg']}"
            for x in errors
        )
        raise CLIError(f"bpecore serve: bad setting: {what or e}", EXIT_USAGE) from None
    host = args.host if args.host is not None else os.environ.get("BPESVC_HOST") or SERVE_HOST
    port = args.port if args.port is not None else settings.port
    _check_listen(host, port)
    run(host, port, args.workers)
    return EXIT_OK


def _add_train(sub: argparse._SubParsersAction) -> None:
    # Listed for --help; ``main`` hands ``bpecore train ...`` to bpecore.training.main, which owns its options.
    sub.add_parser(
        "train", help="train a byte-level BPE vocabulary (bpecore train --help)", add_help=False
    )


#: Subcommands, in help order: each adds its parser to the subparsers and sets ``func``.
_SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_count,
    _add_encode,
    _add_chunk,
    _add_train,
    _add_serve,
]


def build_parser() -> argparse.ArgumentParser:
    from bpecore import __version__

    parser = argparse.ArgumentParser(
        prog="bpecore",
        description="Exact BPE token counting, encoding and chunking (tiktoken-identical).",
    )
    parser.add_argument("--version", action="version", version=f"bpecore {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in _SUBCOMMANDS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``bpecore`` command line; returns the exit code (``EXIT_*``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["train"]:
            from bpecore.training import main as train_main

            return train_main(argv[1:])
        args = build_parser().parse_args(argv)
        return args.func(args)
    except CLIError as e:
        print(e.message, file=sys.stderr)
        return e.code
    except BrokenPipeError:
        # Output closed early (``bpecore chunk big.txt | head``): not an error.
        sys.stderr.close()
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
