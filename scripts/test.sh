#!/usr/bin/env bash
# Runs every test: installs the pinned llama.cpp oracle (npm) and builds
# its drivers, builds the pinned S3 server (versitygw) the s3-tier tests
# start, vets, runs all Go tests with the oracle and the S3 server
# required, and the GPU tests on lavapipe (so no kind of test can silently skip), runs the README's
# examples as written, each fuzz target briefly, the golden check, a
# short load test of the server, the engine and codecs again under GOAMD64=v3 and at every
# kernel level the CPU has, and the builds that must keep working.
#
#   ./scripts/test.sh                      # GGUFTOOL_FUZZTIME=15s per target
#   GGUFTOOL_FUZZTIME=10m ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== llama.cpp oracle, the OpenAI client library for the serve test, the S3 server for the s3-tier tests"
scripts/llamacpp/install.sh
scripts/serve/install-openai.sh
GGUFTOOL_VERSITYGW=$(scripts/s3/install-versitygw.sh)
export GGUFTOOL_VERSITYGW

echo "== go vet"
go vet ./...

echo "== go test"
# The GPU tests run on Mesa's lavapipe with the validation layer; a
# missing driver, layer, glslc or Vulkan headers fails them here. On a
# machine whose Mesa shader cache is cold the gpu and golden packages each
# take close to go test's default 10 minutes, so the limit (a guard
# against a hang, not a speed check) is 30.
GGUFTOOL_REQUIRE_LLAMACPP=1 GGUFTOOL_REQUIRE_S3=1 GGUFTOOL_REQUIRE_GPU=1 go test -timeout 30m ./...

echo "== README examples, as written, against a fresh build"
scripts/readme-examples.sh

# fuzz_one runs one fuzz target for GGUFTOOL_FUZZTIME. Go's fuzz engine
# occasionally ends a run with a bare "context deadline exceeded" when
# -fuzztime expires while a worker is busy on a loaded machine; that (and
# only that: no failing input written) is retried once.
fuzz_one() {
  local target=$1 log
  log=$(mktemp)
  if ! go test "${target%%:*}" -run=NONE -fuzz="^${target##*:}\$" -fuzztime="${GGUFTOOL_FUZZTIME:-15s}" -fuzzminimizetime=5s -timeout 0 2>&1 | tee "$log"; then
    if grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "== retrying ${target} once (fuzz engine deadline flake)"
      go test "${target%%:*}" -run=NONE -fuzz="^${target##*:}\$" -fuzztime="${GGUFTOOL_FUZZTIME:-15s}" -fuzzminimizetime=5s -timeout 0
    else
      rm -f "$log"
      exit 1
    fi
  fi
  rm -f "$log"
}

echo "== fuzz (${GGUFTOOL_FUZZTIME:-15s} per target)"
for target in ./gguf:FuzzReader ./gguf:FuzzOpenSet ./gguf/quant:FuzzDequantize ./gguf/quant:FuzzQuantize ./gguf/quant:FuzzVecDot ./gguf/quant:FuzzVectorKernels ./gguf/quant:FuzzTileKernels \
              ./quantize:FuzzLoadImatrix ./container:FuzzContainer ./container:FuzzManifest ./resident:FuzzManifest \
              ./tiers:FuzzConfig ./tiers:FuzzJournal ./tiers:FuzzObjectURL ./tiers:FuzzListing ./trace:FuzzTrace ./trace:FuzzTraceImport ./tokenizer:FuzzTokenizer \
              ./runtime/server:FuzzRequest ./chattmpl:FuzzTemplate ./runtime/engine:FuzzHparams ./runtime/cachelab:FuzzParse ./runtime/cachelab:FuzzReplayStream ./runtime/planner:FuzzParse; do
  fuzz_one "$target"
done

echo "== golden check: the engine against llama.cpp's recorded outputs, resident and streamed"
go run ./cmd/gguftool golden check

echo "== serve under load: 64 clients for 10 s on loopback (the 60 s run is in docs/benchmarks.md)"
go run ./cmd/gguftool synth --arch qwen3moe --type q8_0 --experts 16 --experts-used 4 -q -o "${TMPDIR:-/tmp}/gguftool-ci-serve.gguf"
go run ./cmd/gguftool bench serve "${TMPDIR:-/tmp}/gguftool-ci-serve.gguf" --clients 64 --duration 10s --queue 8
rm -f "${TMPDIR:-/tmp}/gguftool-ci-serve.gguf"

echo "== codecs and engine again with GOAMD64=v3 (Go may fuse multiply-adds there)"
GOAMD64=v3 GGUFTOOL_REQUIRE_LLAMACPP=1 go test ./gguf/quant ./quantize
GOAMD64=v3 go test -run 'Streamed|OneSlot|Archs|WeightTypes' -skip GPU ./runtime/engine
GOAMD64=v3 go test -run TestRuntimeGoldens ./golden

# Every kernel level this CPU has (gguftool --version lists them: generic,
# the pure-Go reference, and each vector level) must give the same bits;
# the codecs' oracle tests, the engine and the goldens run at each one.
levels=$(go run ./cmd/gguftool --version | sed -n 's/^kernels: .*(this CPU: \(.*\);.*/\1/p' | tr -d ,)
[ -n "$levels" ] || { echo "test.sh: gguftool --version names no kernel levels" >&2; exit 1; }
for level in $levels; do
  echo "== codecs, engine and goldens with GGUFTOOL_KERNELS=$level"
  GGUFTOOL_KERNELS=$level GGUFTOOL_REQUIRE_LLAMACPP=1 go test -count=1 ./gguf/quant
  GGUFTOOL_KERNELS=$level go test -count=1 -run 'Streamed|OneSlot|Archs|WeightTypes' -skip GPU ./runtime/engine
  GGUFTOOL_KERNELS=$level go test -count=1 -run TestRuntimeGoldens ./golden
  if [ "$level" != generic ] && [ "$level" != "${levels##* }" ]; then
    # The kernel fuzzers above ran at the best level (the last one
    # listed); each lower vector level gets them too.
    GGUFTOOL_KERNELS=$level fuzz_one ./gguf/quant:FuzzVectorKernels
    GGUFTOOL_KERNELS=$level fuzz_one ./gguf/quant:FuzzTileKernels
  fi
done
go test -tags purego ./gguf/quant

echo "== builds that must keep working: CGO_ENABLED=0, GOOS=darwin (pread, no io_uring or O_DIRECT) and GOOS=windows (pread through os.File, weights on the Go heap, LockFileEx)"
CGO_ENABLED=0 go build -o /dev/null ./cmd/gguftool
GOOS=darwin go build ./...
GOOS=windows go build ./...
