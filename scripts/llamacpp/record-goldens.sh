#!/usr/bin/env bash
# Re-records the golden fixtures in golden/testdata with llama.cpp, then
# checks them. Run it after a change to synth's output (TestFixturesReproduce
# says when) or to the pinned oracle.
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/llamacpp/install.sh >/dev/null
go test ./golden -run 'TestLlamaCppGoldens' -update
GGUFTOOL_REQUIRE_LLAMACPP=1 go test ./golden
git status --short golden/testdata
