#!/usr/bin/env bash
# Installs llama.cpp, gguftool's independent oracle, from the npm registry
# (the prebuilt CPU libraries of node-llama-cpp, pinned) and builds the C
# driver oracle.c against them. Idempotent: a second run reuses what is
# there. Also builds quantref.c (llama.cpp's block codecs) and
# quantmodel.c (llama-quantize on the C API), for the codec tests. Prints the path of the oracle binary on stdout.
#
#   scripts/llamacpp/install.sh            # into .cache/llamacpp
#   GGUFTOOL_LLAMACPP_DIR=/opt/x scripts/llamacpp/install.sh
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1 # ships llama.cpp v0.4.0
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${GGUFTOOL_LLAMACPP_DIR:-$root/.cache/llamacpp}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pkg=$dir/node_modules/node-llama-cpp
bins=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
if [ ! -f "$pkg/package.json" ] || ! grep -q "\"version\": \"$NODE_LLAMA_CPP_VERSION\"" "$pkg/package.json" || [ ! -d "$bins" ]; then
  echo "installing node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir" >&2
  (cd "$dir" && npm install --no-audit --no-fund --silent -E --omit=optional \
      "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" "@node-llama-cpp/linux-x64@$NODE_LLAMA_CPP_VERSION" >&2)
fi

# Headers come from the llama.cpp source bundle inside the package.
inc=$dir/include
if [ ! -f "$inc/llama.h" ]; then
  src=$(mktemp -d)
  git clone -q --bare "$pkg/llama/gitRelease.bundle" "$src/llama.git"
  mkdir -p "$inc"
  for h in include/llama.h ggml/include/ggml.h ggml/include/ggml-backend.h ggml/include/ggml-cpu.h \
           ggml/include/ggml-opt.h ggml/include/ggml-alloc.h ggml/include/gguf.h; do
    git --git-dir "$src/llama.git" show "HEAD:$h" > "$inc/$(basename "$h")"
  done
  rm -rf "$src"
fi

oracle=$dir/oracle
if [ ! -x "$oracle" ] || [ "$here/oracle.c" -nt "$oracle" ]; then
  cc -O2 -std=c11 -Wall -o "$oracle.tmp" "$here/oracle.c" -I"$inc" -L"$bins" \
     -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -lm -Wl,-rpath,"$bins"
  mv "$oracle.tmp" "$oracle"
fi
quantref=$dir/quantref
if [ ! -x "$quantref" ] || [ "$here/quantref.c" -nt "$quantref" ]; then
  cc -O2 -std=c11 -Wall -o "$quantref.tmp" "$here/quantref.c" -I"$inc" -L"$bins" \
     -l:libggml-base.so -lm -Wl,-rpath,"$bins"
  mv "$quantref.tmp" "$quantref"
fi
quantmodel=$dir/quantmodel
if [ ! -x "$quantmodel" ] || [ "$here/quantmodel.c" -nt "$quantmodel" ]; then
  cc -O2 -std=c11 -Wall -o "$quantmodel.tmp" "$here/quantmodel.c" -I"$inc" -L"$bins" \
     -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so -lm -Wl,-rpath,"$bins"
  mv "$quantmodel.tmp" "$quantmodel"
fi
# dotref.c: the haswell CPU backend's dot products, for quant.VecDot's tests.
dotref=$dir/dotref
if [ ! -x "$dotref" ] || [ "$here/dotref.c" -nt "$dotref" ]; then
  cc -O2 -std=c11 -Wall -o "$dotref.tmp" "$here/dotref.c" -I"$inc" -L"$bins" \
     -DCPU_LIB="\"$bins/libggml-cpu-haswell.so\"" -l:libggml-base.so -ldl -lm -Wl,-rpath,"$bins"
  mv "$dotref.tmp" "$dotref"
fi
printf '%s\n' "$bins" > "$dir/bins.path"
echo "$oracle"
