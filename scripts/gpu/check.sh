#!/usr/bin/env bash
# The GPU backend's checks on a machine with a real GPU and no Go
# toolchain, in two halves:
#
#   scripts/gpu/check.sh build [DIR]   # here, with Go: binaries and Debian packages into DIR (.gpucheck)
#   scripts/gpu/check.sh run [DIR]     # there, from the repository root: every check, one summary
#
# build makes CGO_ENABLED=0 binaries (gguftool and the GPU test binaries)
# and downloads the Vulkan loader and the Khronos validation layer as
# .debs, so the other machine needs neither Go nor packages. run unpacks
# the .debs where the machine has no loader, finds the vendor's driver
# (NVIDIA's nvidia_icd.json often lives outside the loader's default
# paths: it is looked for and passed through VK_DRIVER_FILES), then runs
# gpu info, the kernels' differential tests (validation layer on) and the
# engine's GPU tests on the first usable device, and prints one line per
# check and a summary. It exits 1 if any check failed, 5 if no GPU driver
# was found.
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
  du -sh "$dir"
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
  check kernels "$dir/gpu.test" -test.v -test.count=1
  check engine "$dir/engine.test" -test.v -test.count=1 -test.run 'GPU'
  printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
  return $failed
}

case "$mode" in
  build) build ;;
  run) run ;;
  *) echo "usage: scripts/gpu/check.sh build|run [DIR]" >&2; exit 2 ;;
esac
