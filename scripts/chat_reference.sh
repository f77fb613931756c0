#!/usr/bin/env bash
# The chat-template tests against transformers' apply_chat_template
# (tests/bpecore/test_chat_template_transformers.py and the comparisons of
# tests/service/test_chat_template.py, which skip without it). transformers needs
# regex>=2025.10.22 while the test extra pins regex 2025.9.18 (the scanners' Unicode tables are
# checked against that release), so it is installed on the side, with its own regex, into
# build/chat-reference, which only this run puts on the path. Run it in an environment with the
# service and test extras installed; extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
target=build/chat-reference
if [ ! -d "$target/transformers" ]; then
  python -m pip install --quiet --no-deps --target "$target" \
    "transformers>=5.24,<6" "regex>=2025.10.22" "safetensors>=0.4"
fi
PYTHONPATH="$PWD/$target:$PWD${PYTHONPATH:+:$PYTHONPATH}" python -m pytest -q \
  tests/bpecore/test_chat_template_transformers.py tests/service/test_chat_template.py "$@"
