"""tiktoken 0.14.0's own tests (``tests/``, unmodified; MIT, see LICENSE), run against bpecore.

They import ``tiktoken``; ``forward/tiktoken.py`` makes that name bpecore. They run in a process of
their own, with ``forward/`` first on ``sys.path`` (``tests/test_tiktoken_suite.py``), so that the
real tiktoken, which other tests compare against, stays what ``tiktoken`` means everywhere else.
The main run does not collect them.
"""

import os
from pathlib import Path

if os.environ.get("BPECORE_TIKTOKEN_SUITE") != "1":
    collect_ignore = ["tests"]
else:
    # Hypothesis mixes the string constants of code outside site-packages into ``st.text()``. From
    # a source checkout that includes bpecore's special-token strings, which ``encode`` rightly
    # refuses by default; tiktoken's own run never draws them, as its package is installed. Count
    # bpecore as installed, as it is for a tiktoken user (a no-op if Hypothesis changes this).
    try:
        from hypothesis.internal import scrutineer

        import bpecore

        scrutineer.SITE_PACKAGES_DIRS.add(Path(bpecore.__file__).resolve().parent)
    except (ImportError, AttributeError):
        pass
