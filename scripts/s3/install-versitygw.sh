#!/usr/bin/env bash
# Builds the S3 server the S3 tests run against (Versity's gateway,
# Apache-2.0) from its Go module, pinned, into .cache/bin/versitygw.
# Idempotent; prints the binary's path. About two minutes the first time.
set -euo pipefail
VERSITYGW_VERSION=v1.8.0
dir=$(cd "$(dirname "$0")/../.." && pwd)/.cache/bin
mkdir -p "$dir"
if [ ! -x "$dir/versitygw" ] || [ "$(cat "$dir/versitygw.version" 2>/dev/null)" != "$VERSITYGW_VERSION" ]; then
  echo "building versitygw $VERSITYGW_VERSION into $dir" >&2
  (cd "$dir" && GOBIN="$dir" GOFLAGS= go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION" >&2)
  echo "$VERSITYGW_VERSION" > "$dir/versitygw.version"
fi
echo "$dir/versitygw"
