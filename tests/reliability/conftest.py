"""Reliability suites: fuzzing of the core, schema tests of the service, hostile HTTP, back-pressure
and faults against a real uvicorn. The live-server fixtures are the service suite's
(tests/service/conftest.py), re-exported here; ``fuzz_targets`` (the checks shared with
scripts/reliability/fuzz.py) is importable from this directory."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from tests.service.conftest import (  # noqa: E402,F401  (fixtures by name)
    Server,
    dockerfile_cmd,
    free_port,
    start_server,
    toy_hf,
    toy_tiktoken,
    with_port,
)
