#!/usr/bin/env bash
# The scale benchmark (issue 29): gguftool and llama.cpp on models with the
# exact geometry of the models users run, at long prompts, each process
# alone in a memory cgroup with the same limit. Not run in CI: the full
# models are 12 and 18.6 GB and a 16k-token prompt takes an hour.
#
#   scripts/bench/scale.sh                      # everything: both models, 512/4k/16k, resident and streamed
#   MODELS=qwen3-30b-a3b PROMPTS=512 LAYERS=4 scripts/bench/scale.sh   # a smoke run
#
# For each model it synthesizes the geometry with random blocks straight in
# the shipping types (gguftool synth --mix … --random-blocks: Qwen3-30B-A3B
# as its Q4_K_M file, gpt-oss-20b as its MXFP4_MOE file), packs it, and for
# each prompt length and mode runs, one process at a time, each in a fresh
# memory cgroup with the page cache dropped first:
#
#   resident  gguftool bench decode on the GGUF (every expert in RAM), and
#             llama.cpp reading the GGUF into RAM (no mmap); the limit is
#             the model + its KV cache at gguftool's type + 1.5 GiB;
#   streamed  gguftool bench decode on the pack with a cache of a quarter of
#             the experts, and llama.cpp with its default mmap (its way of
#             running a model larger than its memory); the limit is issue
#             29's bound for a streamed run, resident weights + KV at its
#             type + cache + 256 MiB, plus 1 GiB of slack. A process that
#             passes the limit is killed and its row says OOM.
#
# It reports per run the process's peak RSS (GNU time's maximum resident
# set), the cgroup's peak (which counts the page cache the process's reads
# left, reclaimed at the limit, so it often reads as the limit), load
# seconds, prefill and decode tokens/s (one run each: prefill of the
# prompt, then TOKENS−1 decode steps, streamed from a cold cache), as JSON
# lines in DIR/scale-STAMP/results.jsonl and a Markdown table in
# DIR/scale-STAMP/table.md, beside each run's output and errors.
# Needs root (cgroups, drop_caches), GNU time, python3, go and the oracle
# (scripts/llamacpp/install.sh). Dropping the page cache and the runs'
# memory affect anything else on the machine: run it on an idle one.
#
# Environment (defaults in brackets):
#   MODELS    qwen3-30b-a3b and/or gpt-oss-20b          [both]
#   LAYERS    layer count instead of the model's own     [the model's]
#   PROMPTS   prompt lengths in tokens                   [512 4096 16384]
#   MODES     resident and/or streamed                   [resident streamed]
#   ENGINES   gguftool and/or llamacpp                   [gguftool llamacpp]
#   TOKENS    tokens decoded after each prompt           [16]
#   THREADS   threads for both                           [2]
#   DIR       where models, packs and results go         [/work/scratch-scale]
#   KEEP      1 keeps each model and pack afterwards     [0: deleted, two models do not fit at once]
#   TIMEOUT   seconds one run may take (0: no limit)     [0]
#   KV_TYPE   gguftool's KV cache type, when its bench decode has --cache-type-k [f16]
#   LLAMA_CPU llama.cpp's CPU build: best for this CPU, or a name   [best]
#             (haswell: AVX2, the instructions of gguftool's kernels)
set -euo pipefail
cd "$(dirname "$0")/../.."

MODELS=${MODELS:-"qwen3-30b-a3b gpt-oss-20b"}
PROMPTS=${PROMPTS:-"512 4096 16384"}
MODES=${MODES:-"resident streamed"}
ENGINES=${ENGINES:-"gguftool llamacpp"}
TOKENS=${TOKENS:-16}
THREADS=${THREADS:-2}
DIR=${DIR:-/work/scratch-scale}
KEEP=${KEEP:-0}
TIMEOUT=${TIMEOUT:-0}
KV_TYPE=${KV_TYPE:-f16}
LLAMA_CPU=${LLAMA_CPU:-best}
LAYERS=${LAYERS:-}
GiB=$((1 << 30))

die() { echo "scale: $*" >&2; exit 1; }
say() { echo "scale: $*" >&2; }
[ "$(id -u)" = 0 ] || die "needs root (memory cgroups and drop_caches)"
[ -x /usr/bin/time ] || die "needs GNU time at /usr/bin/time (apt-get install time)"
command -v python3 >/dev/null || die "needs python3"
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
stamp=$(date -u +%Y%m%dT%H%M%SZ) started=$(date +%s)
run=$DIR/scale-$stamp # this run's outputs, logs and results
mkdir "$run"
results=$run/results.jsonl table=$run/table.md
memtotal=$(( $(awk '/^MemTotal/{print $2}' /proc/meminfo) * 1024 ))
: > "$results"

# Memory cgroups: v1 (a memory hierarchy mounted at /sys/fs/cgroup/memory,
# as on the development VMs) or v2 (memory in the unified hierarchy's
# controllers). The parent is this shell's own cgroup.
if [ -d /sys/fs/cgroup/memory ] && grep -q ':memory:' /proc/self/cgroup; then
  cgv=1
  parent=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
elif grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  cgv=2
  parent=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)
  grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null || echo +memory > "$parent/cgroup.subtree_control" ||
    die "cannot enable the memory controller under $parent (a v2 parent with processes in it cannot delegate; run from a leaf-free cgroup)"
else
  die "no memory cgroup controller found (v1 or v2)"
fi
[ -w "$parent" ] || die "$parent is not writable"

oracle=$(scripts/llamacpp/install.sh)
bins=$(cat "$(dirname "$oracle")/bins.path")
bin=$DIR/gguftool-scale
go build -o "$bin" ./cmd/gguftool
kvflags=()
if "$bin" bench decode --help | grep -q -- --cache-type-k; then
  kvflags=(--cache-type-k "$KV_TYPE" --cache-type-v "$KV_TYPE")
else
  KV_TYPE=f32 # the engine before issue 29: an F32 KV cache, no choice
fi

# geometry NAME sets flags to synth's flags for the model (its
# config.json values).
geometry() {
  case $1 in
  qwen3-30b-a3b) # Qwen/Qwen3-30B-A3B: hidden 2048, 48 layers, 32 heads × 128 over 4 KV heads, 128 experts top-8 of FFN 768
    flags=(--arch qwen3moe --layers "${LAYERS:-48}" --embd 2048 --heads 32 --heads-kv 4 --head-dim 128 --experts 128
      --experts-used 8 --expert-ff 768 --vocab 151936 --context 40960 --mix q4_k_m --random-blocks) ;;
  gpt-oss-20b) # openai/gpt-oss-20b: hidden 2880, 24 layers, 64 heads × 64 over 8 KV heads, window 128 on alternate layers, 32 experts top-4 of FFN 2880, YaRN 32 over 4096
    flags=(--arch gpt-oss --layers "${LAYERS:-24}" --embd 2880 --heads 64 --heads-kv 8 --head-dim 64 --experts 32
      --experts-used 4 --expert-ff 2880 --vocab 201088 --context 131072 --mix mxfp4_moe --random-blocks) ;;
  *) die "unknown model $1 (qwen3-30b-a3b, gpt-oss-20b)" ;;
  esac
}

# cgrun LIMIT OUT CMD…: runs CMD in a fresh memory cgroup limited to LIMIT
# bytes, after dropping the page cache, under GNU time; CMD's stdout goes
# to OUT. Prints "rc peak_cgroup_bytes peak_rss_bytes oom wall_seconds".
cgrun() {
  local limit=$1 out=$2; shift 2
  local cg=$parent/gguftool-scale-$$-$RANDOM rss=$out.rss
  mkdir "$cg"
  if [ $cgv = 1 ]; then
    echo "$limit" > "$cg/memory.limit_in_bytes"
    echo "$limit" > "$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
  else
    echo "$limit" > "$cg/memory.max"
    echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
  fi
  sync; echo 3 > /proc/sys/vm/drop_caches
  local t=() rc=0 start end
  [ "$TIMEOUT" != 0 ] && t=(timeout --signal=KILL "$TIMEOUT")
  start=$(date +%s.%N)
  sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' sh "$cg" \
    /usr/bin/time -f %M -o "$rss" "${t[@]}" "$@" > "$out" 2> "$out.err" || rc=$?
  end=$(date +%s.%N)
  local peak oom=0
  if [ $cgv = 1 ]; then
    peak=$(cat "$cg/memory.max_usage_in_bytes")
    grep -q '^oom_kill [1-9]' "$cg/memory.oom_control" 2>/dev/null && oom=1
  else
    peak=$(cat "$cg/memory.peak" 2>/dev/null || echo 0)
    grep -q '^oom_kill [1-9]' "$cg/memory.events" && oom=1
  fi
  # A process the kernel killed for the limit (SIGKILL, 137 through time).
  [ $rc = 137 ] || [ $rc = 9 ] && grep -q "signal 9" "$rss" 2>/dev/null && oom=1
  local kib
  kib=$(grep -E '^[0-9]+$' "$rss" | tail -1 || true)
  rmdir "$cg"
  echo "$rc $peak $(( ${kib:-0} * 1024 )) $oom $(python3 -c "print(round($end - $start, 1))")"
}

# record FIELDS…: appends one JSON result line built by python from
# key=value pairs and the run's output files.
record() {
  python3 - "$results" "$@" <<'PY'
import json, sys
path, args = sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])
row = {k: args[k] for k in ("model", "mode", "engine", "prompt", "status")}
for k in ("limit", "peak_cgroup", "peak_rss", "wall", "bound"):
    row[k] = float(args[k]) if args.get(k) else None
row["prompt"] = int(row["prompt"])
out = open(args["out"]).read().strip()
try:
    j = json.loads(out) if out else None  # bench decode's indented document, or the oracle's one line
except ValueError:
    j = None
if row["status"] == "ok" and j is None:
    row["status"] = "no result"
if j and row["status"] == "ok":
    if row["engine"] == "gguftool":
        o = j["gguftool"]
        row.update(load=o.get("load_seconds"), prefill=o["prefill"], decode=o["decode"])
        if j.get("stream"):
            row.update(hit_rate=j["stream"]["hit_rate"], miss_bytes_per_token=j["stream"]["miss_bytes_per_token"])
    else:
        row.update(load=j["load_seconds"], prefill=j["prompt_tokens"] / j["prefill_seconds"],
                   decode=(len(j["tokens"]) - 1) / j["decode_seconds"])
if row["status"] != "ok":
    err = open(args["out"] + ".err").read().strip().splitlines()
    row["error"] = err[-1][:300] if err else ""
open(path, "a").write(json.dumps(row) + "\n")
print(json.dumps(row), file=sys.stderr)
PY
}

for model in $MODELS; do
  geometry "$model"
  tag=$model${LAYERS:+-l$LAYERS}
  gguf=$DIR/$tag.gguf pack=$DIR/$tag.pack
  if [ ! -f "$gguf" ] || [ "$(cat "$gguf.flags" 2>/dev/null)" != "${flags[*]}" ]; then
    rm -f "$gguf" "$gguf.flags"
    say "synth $tag: ${flags[*]}"
    s0=$(date +%s)
    if ! "$bin" synth "${flags[@]}" -o "$gguf" -q >&2; then
      say "$tag: synth failed (above; a model that does not fit on the disk is refused before it is written): skipped"
      continue
    fi
    echo "${flags[*]}" > "$gguf.flags"
    say "synth $tag: $(stat -c %s "$gguf") bytes in $(( $(date +%s) - s0 )) s"
  fi
  read -r size resident record layers nexp kvh hd < <("$bin" inspect --json "$gguf" | python3 -c '
import json, sys
j = json.load(sys.stdin); h = j["hparams"]
record = max(l["bytes_per_expert"] for l in j["moe"]["layers"])  # a cache slot holds the largest record
print(j["tensor_bytes"], j["resident_bytes"], record, h["layers"], h["expert_count"], h["head_count_kv"], h["head_dim"])')
  if [[ " $MODES " == *" streamed "* ]] && [ ! -d "$pack" ]; then
    free=$(df -B1 --output=avail "$DIR" | tail -1)
    if [ "$free" -lt $((size + GiB)) ]; then
      say "$tag: the pack needs $size bytes, $DIR has $free free: streamed runs skipped"
    else
      say "pack $tag"
      s0=$(date +%s)
      "$bin" pack "$gguf" -o "$pack" -q >&2
      say "pack $tag: $(( $(date +%s) - s0 )) s"
    fi
  fi
  slots=$(( layers * nexp / 4 )) # a quarter of the experts
  cache=$(( slots * record ))
  for prompt in $PROMPTS; do
    ctx=$((prompt + TOKENS))
    kv32=$(( layers * 2 * kvh * hd * 4 * ctx ))
    case $KV_TYPE in f32) kvb=$kv32 ;; f16) kvb=$((kv32 / 2)) ;; q8_0) kvb=$((kv32 * 34 / 128)) ;; *) die "KV_TYPE $KV_TYPE" ;; esac
    ubatch=(); [ "$prompt" -gt 512 ] && ubatch=(--ubatch 512)
    for mode in $MODES; do
      bound=""
      if [ "$mode" = resident ]; then
        limit=$(( size + kvb + 3 * GiB / 2 ))
        model_arg=$gguf extra=() mmap=()
      else
        [ -d "$pack" ] || continue
        bound=$(( resident + kvb + cache + GiB / 4 ))
        limit=$(( bound + GiB ))
        model_arg=$pack extra=(--expert-cache-slots "$slots") mmap=(--mmap)
      fi
      for engine in $ENGINES; do
        out=$run/$tag-$mode-$prompt-$engine.json
        if [ "$limit" -gt $((memtotal - GiB)) ]; then
          say "$tag $mode $prompt $engine: a limit of $limit bytes does not fit in this machine's $memtotal: skipped"
          echo "" > "$out"; echo "needs a $limit-byte limit; the machine has $memtotal" > "$out.err"
          record model="$tag" mode="$mode" engine="$engine" prompt="$prompt" status="did not fit" limit="$limit" bound="$bound" out="$out"
          continue
        fi
        say "$tag $mode prompt $prompt: $engine, limit $limit bytes"
        if [ "$engine" = gguftool ]; then
          r=$(cgrun "$limit" "$out" "$bin" bench decode "$model_arg" --prompt-tokens "$prompt" -n "$TOKENS" --runs 1 \
            --threads "$THREADS" --no-llamacpp --json -q "${extra[@]}" "${kvflags[@]}")
        else
          r=$(cgrun "$limit" "$out" "$oracle" --bins "$bins" --cpu "$LLAMA_CPU" --threads "$THREADS" --kv "$KV_TYPE" "$gguf" bench \
            --prompt-tokens "$prompt" -n "$TOKENS" "${ubatch[@]}" "${mmap[@]}")
        fi
        read -r rc peak rss oom wall <<< "$r"
        status=ok
        [ "$rc" != 0 ] && status="exit $rc"
        [ "$oom" = 1 ] && status=OOM
        record model="$tag" mode="$mode" engine="$engine" prompt="$prompt" status="$status" limit="$limit" bound="$bound" \
          peak_cgroup="$peak" peak_rss="$rss" wall="$wall" out="$out"
      done
    done
  done
  if [ "$KEEP" != 1 ]; then
    rm -rf "$gguf" "$gguf.flags" "$pack"
  fi
done

# The table, under what was measured where.
{
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | xargs);" \
    "$(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|f16c|avx512f)$' | xargs)), $((memtotal / GiB)) GiB RAM," \
    "memory cgroup v$cgv, llama.cpp CPU build $LLAMA_CPU, load average at the end $(cut -d' ' -f1-3 /proc/loadavg), $TOKENS tokens decoded, $THREADS threads," \
    "$(( ($(date +%s) - started + 59) / 60 )) min in all"
  echo
} | tee "$table"
python3 - "$results" "$KV_TYPE" <<'PY' | tee -a "$table"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
gib = lambda b: "–" if not b else f"{b / 2**30:.2f}"
num = lambda x, f="{:.1f}": "–" if x is None else f.format(x)
print(f"| model | mode | prompt | engine | limit GiB | bound GiB (KV {sys.argv[2]}) | peak cgroup GiB | peak RSS GiB | load s | prefill tok/s | decode tok/s | status |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    eng = "llama.cpp" + (" (mmap)" if r["mode"] == "streamed" else "") if r["engine"] == "llamacpp" else "gguftool"
    print(f"| {r['model']} | {r['mode']} | {r['prompt']} | {eng} | {gib(r['limit'])} | {gib(r['bound']) if r['engine'] == 'gguftool' else '–'} | "
          f"{gib(r.get('peak_cgroup'))} | {gib(r.get('peak_rss'))} | {num(r.get('load'), '{:.2f}')} | {num(r.get('prefill'))} | "
          f"{num(r.get('decode'), '{:.2f}')} | {r['status']} |")
PY
