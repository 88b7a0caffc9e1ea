#!/usr/bin/env bash
# The GPU backend's checks on a machine with a real GPU and no Go
# toolchain, in two halves:
#
#   scripts/gpu/check.sh build [DIR]   # here, with Go: binaries and Debian packages into DIR (.gpucheck)
#   scripts/gpu/check.sh run [DIR]     # there, from the repository root: every check, one summary
#
# build makes CGO_ENABLED=0 binaries (gguftool and the GPU test binaries),
# downloads the Vulkan loader and the Khronos validation layer as .debs,
# and packs llama.cpp's Vulkan build (the oracle driver and the libraries
# it loads, with the C++ runtime they need; scripts/llamacpp/install.sh
# makes them) as one xz archive, so the other machine needs neither Go
# nor packages (only a glibc at least as new as this one's). run unpacks
# the .debs where the machine has no loader, finds the vendor's driver
# (NVIDIA's nvidia_icd.json often lives outside the loader's default
# paths: it is looked for and passed through VK_DRIVER_FILES), then runs
# on the first usable device: gpu info, the kernels' differential tests
# (validation layer on), the engine's GPU tests, the goldens on the GPU
# path (golden check --gpu on), and bench decode against llama.cpp's
# Vulkan build on the same device on a model of Qwen3-30B-A3B's geometry
# (BENCH_LAYERS of its 48 layers, 12 by default; Q4_K_M; a BENCH_PROMPT-token
# prompt, 512, then BENCH_TOKENS decoded, 64), with the routed
# experts in VRAM and on the CPU (llama.cpp's --cpu-moe); it prints one
# line per check and a summary. It exits 1 if any check failed, 5 if no
# GPU driver was found. CHECKS="kernels engine goldens bench" (the
# default) picks which run after gpu info.
set -uo pipefail
mode=${1:-}
dir=${2:-.gpucheck}
root=$(cd "$(dirname "$0")/../.." && pwd)

build() {
  set -e
  mkdir -p "$dir/debs"
  cd "$root"
  CGO_ENABLED=0 go build -ldflags="-s -w" -o "$dir/gguftool" ./cmd/gguftool
  CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/gpu.test" ./gpu
  CGO_ENABLED=0 go test -c -ldflags="-s -w" -o "$dir/engine.test" ./runtime/engine
  (cd "$dir/debs" && apt-get download libvulkan1 vulkan-validationlayers >/dev/null)
  local cache=$root/.cache/llamacpp
  if [ ! -f "$cache/oracle-vulkan" ] || [ ! -f "$cache/vkbins.path" ]; then
    echo "check: llama.cpp's Vulkan build is not installed: run scripts/llamacpp/install.sh first" >&2
    exit 1
  fi
  local vk
  vk=$(cat "$cache/vkbins.path")
  mkdir -p "$dir/llamacpp/runtime"
  cp "$cache/oracle" "$cache/oracle-vulkan" "$dir/llamacpp/"
  cp -L /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /lib/x86_64-linux-gnu/libgcc_s.so.1 "$dir/llamacpp/runtime/"
  (cd "$vk" && tar -cf - libggml-base.so libggml-vulkan.so libggml.vulkan.v0.4.0.so libllama.vulkan.v0.4.0.so libggml-cpu-*.so) |
    xz -T0 -6 >"$dir/llamacpp/bins.tar.xz"
  du -sh "$dir"
}

# unpack_llamacpp unpacks llama.cpp's Vulkan build from build's archive
# and points gguftool at it (GGUFTOOL_LLAMACPP_DIR).
unpack_llamacpp() {
  local d
  d=$(cd "$dir/llamacpp" && pwd)
  mkdir -p "$d/bins"
  xz -dc "$d/bins.tar.xz" | tar -C "$d/bins" -xf -
  echo "$d/bins" >"$d/vkbins.path"
  echo "$d/bins" >"$d/bins.path"
  export GGUFTOOL_LLAMACPP_DIR=$d
  # The oracle was linked against libraries by their build paths: these
  # (and the C++ runtime, where the machine has none) come first.
  export LD_LIBRARY_PATH=$d/bins:${LD_LIBRARY_PATH:-}:$d/runtime
}

# find_driver sets VK_DRIVER_FILES to the vendor ICDs found, unless set.
find_driver() {
  [ -n "${VK_DRIVER_FILES:-}${VK_ICD_FILENAMES:-}" ] && return 0
  local found=()
  for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/share/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d \
           /usr/local/nvidia/icd.d /usr/lib/x86_64-linux-gnu/nvidia /opt/amdgpu/etc/vulkan/icd.d; do
    for f in "$d"/*.json; do
      [ -f "$f" ] || continue
      case "$(basename "$f")" in lvp_icd*) continue ;; esac # lavapipe is no GPU
      found+=("$f")
    done
  done
  if [ ${#found[@]} -eq 0 ]; then
    echo "check: no GPU Vulkan driver found (looked for nvidia_icd.json, radeon_icd, intel_icd in the usual directories); set VK_DRIVER_FILES" >&2
    exit 5
  fi
  VK_DRIVER_FILES=$(IFS=:; echo "${found[*]}")
  export VK_DRIVER_FILES
}

run() {
  cd "$root"
  local out=${OUT:-$dir/out}
  mkdir -p "$out"
  if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan.so.1 '; then
    for f in "$dir"/debs/libvulkan1_*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  if [ ! -f /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json ]; then
    for f in "$dir"/debs/vulkan-validationlayers_*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  find_driver
  echo "VK_DRIVER_FILES=$VK_DRIVER_FILES"
  local summary=() failed=0
  check() { # check NAME COMMAND...: runs, logs to $out/NAME.log, records the result
    local name=$1
    shift
    local t0=$SECONDS
    if "$@" >"$out/$name.log" 2>&1; then
      summary+=("PASS $name ($((SECONDS - t0)) s)")
    else
      summary+=("FAIL $name ($((SECONDS - t0)) s): see $out/$name.log")
      failed=1
    fi
  }
  check gpu-info "$dir/gguftool" gpu info --json
  cat "$out/gpu-info.log"
  local index
  index=$(sed -n 's/.*"chosen_with_gpu_on": *\(-\{0,1\}[0-9]*\).*/\1/p' "$out/gpu-info.log" | head -1)
  if [ -z "$index" ] || [ "$index" -lt 0 ]; then
    echo "check: gpu info found no usable GPU" >&2
    exit 5
  fi
  export GGUFTOOL_TEST_GPU_DEVICE=$index GGUFTOOL_REQUIRE_GPU=1
  want kernels && check kernels "$dir/gpu.test" -test.v -test.count=1
  want engine && check engine "$dir/engine.test" -test.v -test.count=1 -test.run 'GPU'
  want goldens && check goldens "$dir/gguftool" golden check --gpu on --gpu-device "$index"
  if want bench; then bench "$index"; fi
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  return $failed
}

# want NAME says whether CHECKS (a list of kernels, engine, goldens and
# bench; all by default) asks for a check.
want() { [[ " ${CHECKS:-kernels engine goldens bench} " == *" $1 "* ]]; }

# bench INDEX runs bench decode on device INDEX against llama.cpp's Vulkan
# build, the experts in VRAM and then on the CPU.
bench() {
  local index=$1
  unpack_llamacpp
  local model=${TMPDIR:-/tmp}/gguftool-check-qwen3-30b-a3b.gguf
  check synth "$dir/gguftool" synth --arch qwen3moe --layers "${BENCH_LAYERS:-12}" --embd 2048 --heads 32 --heads-kv 4 \
    --head-dim 128 --experts 128 --experts-used 8 --expert-ff 768 --vocab 151936 --context 40960 --mix q4_k_m \
    --random-blocks -q -o "$model"
  for experts in vram cpu; do
    check "bench-experts-$experts" "$dir/gguftool" bench decode "$model" --gpu on --gpu-device "$index" --gpu-experts "$experts" \
      --prompt-tokens "${BENCH_PROMPT:-512}" -n "${BENCH_TOKENS:-64}" --runs 3 --json
    summary+=("  experts in $experts: $(sed -n 's/.*"decode_ratio": *\([0-9.]*\).*/decode ratio (gguftool ÷ llama.cpp): \1/p; s/.*"prefill_ratio": *\([0-9.]*\).*/prefill ratio: \1/p;
            s/.*"efficiency": *\([0-9.e+-]*\).*/decode ÷ the device bandwidth bound: \1/p; s/.*"copy_gb_per_s": *\([0-9.e+-]*\).*/copy bandwidth GB\/s: \1/p' \
      "$out/bench-experts-$experts.log" | paste -sd ';' -)")
  done
  rm -f "$model"
}

case "$mode" in
  build) build ;;
  run) run ;;
  *) echo "usage: scripts/gpu/check.sh build|run [DIR]" >&2; exit 2 ;;
esac
