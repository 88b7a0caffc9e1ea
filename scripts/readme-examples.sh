#!/usr/bin/env bash
# Runs every command of the README's ```sh examples as written, against a
# gguftool built from this tree, and fails on the first one that fails,
# naming its README line and showing its output. The commands run in a
# temporary directory that holds ./gguftool; /tmp/ in a command means that
# directory, and HOME and TMPDIR are inside it, so nothing outside is read
# or written.
#
# A command that needs what a test machine lacks (a mount point, a running
# server, the llama.cpp oracle) or that another step of scripts/test.sh
# already runs is skipped, for the reason the skip list below gives. An
# entry of the list that matches no README command fails the run, so the
# list cannot outlive the examples it names.
#
#   scripts/readme-examples.sh              # README.md
#   scripts/readme-examples.sh OTHER.md
set -euo pipefail
readme=$(realpath "${1:-$(dirname "$0")/../README.md}")
cd "$(dirname "$0")/.."

# Commands skipped, by how they begin, and why.
declare -A skip=(
  ["./scripts/test.sh"]="runs every test, this script among them"
  ["go build -o gguftool ./cmd/gguftool"]="this script has just built ./gguftool from the tree"
  ["./gguftool golden check"]="half a minute; scripts/test.sh runs it as a step of its own"
  ["./gguftool serve "]="starts a server that runs until stopped"
  ["curl "]="needs the server the line before starts"
  ["./gguftool migrate /mnt/"]="needs the mount points /mnt/nvme and /mnt/archive"
  ["./gguftool migrate qwen3 "]="needs the mount points /mnt/nvme and /mnt/archive"
  ["./gguftool ensure-hot qwen3 "]="needs the mount points /mnt/nvme and /mnt/archive"
  ["./gguftool twins verify /mnt/"]="needs the mount points /mnt/nvme and /mnt/archive"
  ["./gguftool migrate qwen3.pack --to s3"]="needs the mount point /mnt/nvme and an S3 server on 127.0.0.1:7070"
  ["scripts/llamacpp/oracle.sh model.gguf "]="needs the llama.cpp oracle, which scripts/llamacpp/install.sh installs, and a model of your own"
)
declare -A used=()

command -v jq >/dev/null || { echo "readme-examples: the examples pipe into jq: install it" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gguftool-readme-XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -o "$work/gguftool" ./cmd/gguftool
mkdir "$work/home"
# What the commands see: no GGUFTOOL_* or XDG_* settings of the caller's.
unset XDG_CONFIG_HOME
while IFS= read -r name; do unset "$name"; done < <(compgen -e | grep '^GGUFTOOL_' || true)

# run_example runs one command (with its here-document, if any) that
# begins on README line $1, unless the skip list names it.
run_example() {
  local line=$1 cmd=$2 prefix
  for prefix in "${!skip[@]}"; do
    if [[ $cmd == "$prefix"* ]]; then
      used[$prefix]=1
      echo "readme-examples: $readme:$line: skipped (${skip[$prefix]}): ${cmd%%$'\n'*}"
      return
    fi
  done
  echo "readme-examples: $readme:$line: \$ ${cmd%%$'\n'*}"
  cmd=${cmd//go run .\/cmd\/gguftool/.\/gguftool}
  cmd=${cmd//\/tmp\//$work\/}
  # </dev/null: an example must not read the rest of the README as its input
  # (here-documents carry their own).
  if ! (cd "$work" && HOME="$work/home" TMPDIR="$work" bash -euo pipefail -c "$cmd") < /dev/null > "$work/output" 2>&1; then
    cat "$work/output" >&2
    echo "readme-examples: $readme:$line failed: $2" >&2
    exit 1
  fi
}

n=0 fenced=0 start=0 cmd="" heredoc_end=""
while IFS= read -r text || [[ -n $text ]]; do
  n=$((n + 1))
  if [[ $fenced == 0 ]]; then
    [[ $text == '```sh' ]] && fenced=1
    continue
  fi
  if [[ -n $heredoc_end ]]; then # inside a here-document: its body is part of the command
    cmd+=$'\n'$text
    if [[ $text == "$heredoc_end" ]]; then
      heredoc_end=""
      run_example "$start" "$cmd"
    fi
    continue
  fi
  if [[ $text == '```' ]]; then
    fenced=0
    continue
  fi
  [[ $text =~ ^[[:space:]]*(#.*)?$ ]] && continue # blank or a comment
  start=$n cmd=$text
  if [[ $text =~ \<\<-?\'?([A-Za-z_]+)\'? ]]; then
    heredoc_end=${BASH_REMATCH[1]}
    continue
  fi
  run_example "$start" "$cmd"
done < "$readme"
[[ -z $heredoc_end ]] || { echo "readme-examples: $readme:$start: here-document never ends ($heredoc_end)" >&2; exit 1; }

for prefix in "${!skip[@]}"; do
  if [[ -z ${used[$prefix]:-} ]]; then
    echo "readme-examples: the skip list names \"$prefix\", which no command of $readme begins with: remove it" >&2
    exit 1
  fi
done
echo "readme-examples: every example of $readme ran, or is skipped for the reason given"
