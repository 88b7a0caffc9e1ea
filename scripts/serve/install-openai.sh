#!/usr/bin/env bash
# Installs the official OpenAI client library from npm (pinned) into
# .cache/openai, for the serve end-to-end test. Idempotent.
set -euo pipefail
OPENAI_VERSION=4.95.0
dir=$(cd "$(dirname "$0")/../.." && pwd)/.cache/openai
mkdir -p "$dir"
if [ ! -f "$dir/node_modules/openai/package.json" ] || ! grep -q "\"version\": \"$OPENAI_VERSION\"" "$dir/node_modules/openai/package.json"; then
  echo "installing openai@$OPENAI_VERSION into $dir" >&2
  (cd "$dir" && { [ -f package.json ] || echo '{"private":true}' > package.json; } &&
    npm install --no-audit --no-fund --silent -E "openai@$OPENAI_VERSION" >&2)
fi
echo "$dir"
