"""Build the Cython core. Every bpecore/*.pyx is a module; directives live in one dict."""

import glob
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

CHECKED = os.environ.get("BPECORE_CHECKED") == "1"

DIRECTIVES = {
    "language_level": 3,
    "embedsignature": True,
    "boundscheck": CHECKED,
    "wraparound": False,
    "initializedcheck": CHECKED,
    "cdivision": True,
}

MODULES = sorted(p[:-4].replace(os.sep, ".") for p in glob.glob(os.path.join("bpecore", "*.pyx")))
# Pure-Python modules compiled as they are, typed by the augmenting .pxd beside them: the .py
# stays the one source and still runs uncompiled (tests compare the two builds' results).
PY_MODULES = ["bpecore.chunker"]
# BPECORE_ONLY=backtrack,interval rebuilds just those modules (a quick loop while editing one).
ONLY = {m.strip() for m in os.environ.get("BPECORE_ONLY", "").split(",") if m.strip()}
if ONLY:
    MODULES = [m for m in MODULES if m.rsplit(".", 1)[1] in ONLY]
    PY_MODULES = [m for m in PY_MODULES if m.rsplit(".", 1)[1] in ONLY]

# The C/C++ headers (bpecore/*.h, shipped as package data) are included as "bpecore/x.h": the
# project root is on the include path, in place, from an sdist and in a wheel build alike.
ROOT = os.path.dirname(os.path.abspath(__file__))


def extension(name, suffix):
    return Extension(
        name,
        [name.replace(".", os.sep) + suffix],
        include_dirs=[ROOT],
        language="c++",
        extra_compile_args=["-O3", "-std=c++17"] + (["-UNDEBUG"] if CHECKED else ["-DNDEBUG"]),
    )


def compiled(names, suffix, **directives):
    exts = [extension(m, suffix) for m in names]
    if not exts:
        return []
    return cythonize(
        exts, compiler_directives={**DIRECTIVES, **directives}, nthreads=os.cpu_count() or 1
    )


# A .py's annotations are for readers and mypy; its .pxd alone gives the C types. Its indexing
# keeps Python's meaning (negative indices, IndexError), which the .py may rely on.
extensions = compiled(MODULES, ".pyx") + compiled(
    PY_MODULES, ".py", annotation_typing=False, boundscheck=True, wraparound=True
)

setup(
    ext_modules=extensions,
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
