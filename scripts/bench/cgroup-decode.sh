#!/usr/bin/env bash
# Decode speed of the two ways to run a model larger than the memory you
# give it, side by side: gguftool streaming routed experts from a pack
# through its cache (cache sized automatically from the cgroup limit), and
# llama.cpp with its default mmap, each as a whole process inside its own
# cgroup-v1 memory cgroup with the same limit, the page cache dropped
# before each. Needs root (cgroup and drop_caches) and the oracle
# (scripts/llamacpp/install.sh).
#
#   scripts/bench/cgroup-decode.sh MODEL.gguf MODEL.pack [LIMIT_BYTES] [TOKENS] [THREADS] [GGUFTOOL_FLAGS]
#
# LIMIT defaults to half the GGUF's size. GGUFTOOL_FLAGS are added to
# gguftool's command line ("--prefetch", "--plan FILE"). Prints one JSON line per run and
# the ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
gguf=$1 pack=$2
size=$(stat -c %s "$gguf")
limit=${3:-$((size / 2))}
tokens=${4:-16}
threads=${5:-2}
read -r -a extra <<< "${6:-}"
prompt=8

parent=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
[ -w "$parent" ] || { echo "cgroup-decode: $parent is not writable (needs root and cgroup v1 memory)" >&2; exit 1; }
oracle=$(scripts/llamacpp/install.sh)
bins=$(cat "$(dirname "$oracle")/bins.path")
go build -o /tmp/gguftool-cgroup-bench ./cmd/gguftool

# run NAME CMD…: runs CMD in a fresh cgroup limited to $limit bytes after
# dropping the page cache; prints CMD's stdout and the cgroup's peak usage.
run() {
  local name=$1; shift
  local cg=$parent/gguftool-bench-$name-$$
  mkdir "$cg"
  echo "$limit" > "$cg/memory.limit_in_bytes"
  sync; echo 3 > /proc/sys/vm/drop_caches
  local out
  out=$(sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" "$@")
  echo "{\"run\":\"$name\",\"limit_bytes\":$limit,\"peak_bytes\":$(cat "$cg/memory.max_usage_in_bytes"),\"result\":$out}"
  rmdir "$cg"
}

ours=$(run gguftool /tmp/gguftool-cgroup-bench bench decode "$pack" --prompt-tokens $prompt -n "$tokens" --runs 1 \
  --threads "$threads" --expert-cache auto --no-llamacpp --json -q "${extra[@]}")
echo "$ours"
peer=$(run llamacpp "$oracle" --bins "$bins" --cpu best --threads "$threads" --kv f16 "$gguf" bench \
  --prompt-tokens $prompt -n "$tokens" --mmap)
echo "$peer"
python3 - "$ours" "$peer" <<'PY'
import json, sys
o, p = json.loads(sys.argv[1]), json.loads(sys.argv[2])
ours = o["result"]["gguftool"]["decode"]
r = p["result"]
peer = (len(r["tokens"]) - 1) / r["decode_seconds"]
print(json.dumps({"limit_bytes": o["limit_bytes"], "gguftool_decode_tok_s": round(ours, 3), "llamacpp_mmap_decode_tok_s": round(peer, 3),
                  "times_faster": round(ours / peer, 1), "gguftool_peak_bytes": o["peak_bytes"], "llamacpp_peak_bytes": p["peak_bytes"]}))
PY
