"""tiktoken 0.14.0's own tests (``tests/``, unmodified; MIT, see LICENSE), run against bpecore.

They import ``tiktoken``; ``forward/tiktoken.py`` makes that name bpecore. They run in a process of
their own, with ``forward/`` first on ``sys.path`` (``tests/test_tiktoken_suite.py``), so that the
real tiktoken, which other tests compare against, stays what ``tiktoken`` means everywhere else.
The main run does not collect them.
"""

import os

if os.environ.get("BPECORE_TIKTOKEN_SUITE") != "1":
    collect_ignore = ["tests"]
