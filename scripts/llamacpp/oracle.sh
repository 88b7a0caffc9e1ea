#!/usr/bin/env bash
# Runs llama.cpp (the pinned node-llama-cpp build) on a model, installing
# it first if needed. Prints one JSON object.
#
#   scripts/llamacpp/oracle.sh MODEL.gguf load
#   scripts/llamacpp/oracle.sh MODEL.gguf generate --prompt 72,101,108 -n 16
#   scripts/llamacpp/oracle.sh MODEL.gguf score --ids 72,101,108,108 --top 8 --logits-out logits.f32
#
# Defaults: CPU backend haswell, 2 threads, F32 KV cache, flash attention off.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
oracle=$("$here/install.sh")
bins=$(cat "$(dirname "$oracle")/bins.path")
exec "$oracle" --bins "$bins" "$@"
