#!/usr/bin/env bash
# Developer loop: build | build-checked | test | bench | clean
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-build}" in
  build) python setup.py build_ext --inplace -j 2 ;;
  build-checked) BPECORE_CHECKED=1 python setup.py build_ext --inplace --force -j 2 ;;
  test) python -m pytest -q -m "not slow" ;;
  bench) for b in benches/bench_*.py; do python "$b"; done ;;
  clean) rm -rf build bpecore/*.cpp bpecore/*.so bpecore/*.html ;;
  *) echo "usage: $0 build|build-checked|test|bench|clean" >&2; exit 2 ;;
esac
