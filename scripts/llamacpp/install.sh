#!/usr/bin/env bash
# Installs llama.cpp, gguftool's independent oracle, from the npm registry
# (the prebuilt CPU libraries of node-llama-cpp, pinned) and builds the C
# driver oracle.c against them, and oracle.c again against the Vulkan
# build (oracle-vulkan; @node-llama-cpp/linux-x64-vulkan, the same
# llama.cpp), the oracle of the GPU path, which runs on Mesa's lavapipe. Idempotent: a second run reuses what is
# there. Also builds quantref.c (llama.cpp's block codecs) and
# quantmodel.c (llama-quantize on the C API), for the codec tests, and
# tokref.c (llama.cpp's tokenizer), for the tokenizer tests. Prints the
# path of the oracle binary on stdout.
#
#   scripts/llamacpp/install.sh            # into .cache/llamacpp
#   GGUFTOOL_LLAMACPP_DIR=/opt/x scripts/llamacpp/install.sh
set -euo pipefail

NODE_LLAMA_CPP_VERSION=3.21.1 # ships llama.cpp v0.4.0
# node-llama-cpp asks for @huggingface/jinja by a caret range, so npm takes
# the newest 0.5.x of the day; the chat-template tests compare against the
# version it was released with, pinned here.
HF_JINJA_VERSION=0.5.11
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=${GGUFTOOL_LLAMACPP_DIR:-$root/.cache/llamacpp}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

pkg=$dir/node_modules/node-llama-cpp
bins=$dir/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
jinja=$dir/node_modules/@huggingface/jinja/package.json
if [ ! -f "$pkg/package.json" ] || ! grep -q "\"version\": \"$NODE_LLAMA_CPP_VERSION\"" "$pkg/package.json" || [ ! -d "$bins" ] ||
   [ ! -f "$jinja" ] || ! grep -q "\"version\": \"$HF_JINJA_VERSION\"" "$jinja"; then
  echo "installing node-llama-cpp@$NODE_LLAMA_CPP_VERSION into $dir" >&2
  (cd "$dir" && npm install --no-audit --no-fund --silent -E --omit=optional \
      "node-llama-cpp@$NODE_LLAMA_CPP_VERSION" "@node-llama-cpp/linux-x64@$NODE_LLAMA_CPP_VERSION" "@huggingface/jinja@$HF_JINJA_VERSION" >&2)
fi
vkbins=$dir/node_modules/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan
if [ ! -f "$vkbins/libggml-vulkan.so" ]; then
  echo "installing @node-llama-cpp/linux-x64-vulkan@$NODE_LLAMA_CPP_VERSION into $dir" >&2
  (cd "$dir" && npm install --no-audit --no-fund --silent -E --omit=optional --no-save \
      "@node-llama-cpp/linux-x64-vulkan@$NODE_LLAMA_CPP_VERSION" >&2)
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

# build NAME FLAGS…: compile NAME.c into $dir/NAME when it or helpers.h is newer.
build() {
  local name=$1
  shift
  local bin=$dir/$name
  if [ ! -x "$bin" ] || [ "$here/$name.c" -nt "$bin" ] || [ "$here/helpers.h" -nt "$bin" ]; then
    cc -O2 -std=c11 -Wall -o "$bin.tmp" "$here/$name.c" -I"$here" -I"$inc" -L"$bins" "$@" -lm -Wl,-rpath,"$bins"
    mv "$bin.tmp" "$bin"
  fi
}
libllama=(-l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so)
build oracle "${libllama[@]}"                 # model loading, greedy ids, logits
build quantmodel "${libllama[@]}"             # llama-quantize on llama_model_quantize
build tokref "${libllama[@]}"                 # llama_tokenize / llama_detokenize
build quantref -l:libggml-base.so             # block codecs
build ggufrewrite -l:libggml-base.so          # files written by llama.cpp's GGUF writer
build dotref -DCPU_LIB="\"$bins/libggml-cpu-haswell.so\"" -l:libggml-base.so -ldl  # CPU dot products
# The Vulkan build: the same driver linked against its libraries.
vkbin=$dir/oracle-vulkan
if [ ! -x "$vkbin" ] || [ "$here/oracle.c" -nt "$vkbin" ] || [ "$here/helpers.h" -nt "$vkbin" ]; then
  cc -O2 -std=c11 -Wall -o "$vkbin.tmp" "$here/oracle.c" -I"$here" -I"$inc" -L"$vkbins" \
    -l:libllama.vulkan.v0.4.0.so -l:libggml.vulkan.v0.4.0.so -l:libggml-base.so -lm -Wl,-rpath,"$vkbins"
  mv "$vkbin.tmp" "$vkbin"
fi
printf '%s\n' "$vkbins" > "$dir/vkbins.path"
oracle=$dir/oracle
printf '%s\n' "$bins" > "$dir/bins.path"
echo "$oracle"
