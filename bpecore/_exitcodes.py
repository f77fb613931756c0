"""The ``bpecore`` command's exit codes and its user-error exception (README, "Command line").

The service exits with the same codes for its start-up failures, however it is started
(``bpecore serve``, ``python -m bpecore_service``, the image's ``uvicorn`` CMD): 2, 3 and 4 below.

A module of its own so that ``bpecore.cli`` and the subcommands it hands over to
(``bpecore.training.main``) both raise ``CLIError`` without importing each other.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_INPUT = 1  # an input could not be used: missing, unreadable, not UTF-8 text, unknown encoding
EXIT_USAGE = (
    2  # bad options or values (also argparse's own code); a BPESVC_ setting that does not parse
)
EXIT_LOAD = (
    3  # serve: the configured encodings failed to load (uvicorn's code for a failed start-up)
)
EXIT_LISTEN = 4  # serve: cannot listen on the address (port in use, not permitted, no such host)
EXIT_SHORT_VOCAB = 5  # train: vocabulary written, but with fewer ids than --vocab-size asked


class CLIError(Exception):
    """A user error: ``message`` is printed as one line on stderr and ``code`` is the exit code."""

    def __init__(self, message: str, code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
