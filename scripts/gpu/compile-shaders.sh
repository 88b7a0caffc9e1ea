#!/usr/bin/env bash
# Compiles gpu/shaders/src into the SPIR-V modules gpu/shaders embeds, as
# the gpu/shaders/*.variants files list them, with Debian's glslc (shaderc
# 2023.2): --target-env=vulkan1.2 -O gives the same bytes from run to run
# (-g would not). The modules are committed, so building gguftool needs no
# glslc; TestSPIRVUpToDate recompiles them and compares.
#
#   scripts/gpu/compile-shaders.sh          # into gpu/shaders/spv, dropping modules no longer listed
#   scripts/gpu/compile-shaders.sh DIR      # into DIR (the test's check)
#   GPU_VARIANTS=ops scripts/gpu/compile-shaders.sh   # only ops.variants, dropping nothing
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
shaders=$root/gpu/shaders
out=${1:-$shaders/spv}
command -v glslc >/dev/null || { echo "compile-shaders: glslc is not installed (Debian's glslc)" >&2; exit 1; }
mkdir -p "$out"
declare -A listed=()
while read -r name src defines; do
  case "$name" in ''|'#'*) continue ;; esac
  args=()
  for d in $defines; do args+=("-D$d"); done
  glslc --target-env=vulkan1.2 -O -fshader-stage=compute -I "$shaders/src" "${args[@]}" \
    -o "$out/$name.spv.tmp" "$shaders/src/$src"
  mv "$out/$name.spv.tmp" "$out/$name.spv"
  listed[$name]=1
done < <(cat "$shaders"/${GPU_VARIANTS:-*}.variants)
if [ $# -eq 0 ] && [ -z "${GPU_VARIANTS:-}" ]; then
  for f in "$out"/*.spv; do
    n=$(basename "$f" .spv)
    [ -n "${listed[$n]:-}" ] || { echo "removing $f (in no .variants file)" >&2; rm -f "$f"; }
  done
fi
