#!/usr/bin/env bash
# llama.cpp's byte-level BPE test vocabularies (MIT), for tests/bpecore/test_gguf_vocabs.py and
# benches/bench_open_models.py: the ggml-vocab-NAME.gguf files below, their .inp/.out test
# vectors (texts and the ids Hugging Face `tokenizers` gives them) and llama.cpp's LICENSE,
# taken from the llama-cpp-python sdist (pinned below, SHA-256 checked) into build/gguf-vocabs/.
# Only those files are extracted (44 MB of the 77 MB sdist; the SentencePiece, WordPiece and
# Gemma vocabularies are left out); the sdist stays in build/, and a second run does nothing.
# The tests skip, saying why, when the folder is missing. About 16 s on a first run here.
#
# `pip download` of an sdist prepares its metadata, which in an isolated build environment
# compiles CMake from source (minutes); so the build backend (scikit-build-core, pure Python) is
# installed beside it, into build/gguf-tools, and the download runs without isolation.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
sdist=build/llama_cpp_python-$version.tar.gz
out=build/gguf-vocabs
if [ -f "$out/.complete-$version" ]; then
  exit 0
fi
mkdir -p build
if [ ! -f "$sdist" ]; then
  python -m pip install --quiet --target build/gguf-tools "scikit-build-core>=0.10"
  PYTHONPATH="$PWD/build/gguf-tools${PYTHONPATH:+:$PYTHONPATH}" python -m pip download --quiet \
    --no-deps --no-binary :all: --no-build-isolation -d build "llama-cpp-python==$version"
fi
echo "$sha256  $sdist" | sha256sum --check --quiet
rm -rf "$out" && mkdir -p "$out"
prefix=llama_cpp_python-$version/vendor/llama.cpp
members=("$prefix/LICENSE")
for name in command-r deepseek-coder deepseek-llm falcon gpt-2 gpt-neox llama-bpe mpt qwen2 \
  qwen35 refact starcoder; do
  members+=("$prefix/models/ggml-vocab-$name.gguf")
  if [ "$name" != gpt-neox ]; then  # llama.cpp has no test vectors for it
    members+=("$prefix/models/ggml-vocab-$name.gguf.inp" "$prefix/models/ggml-vocab-$name.gguf.out")
  fi
done
tar -xzf "$sdist" -C "$out" --strip-components=3 "${members[@]}"
mv "$out"/models/* "$out"/ && rmdir "$out/models"
touch "$out/.complete-$version"
