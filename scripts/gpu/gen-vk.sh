#!/usr/bin/env bash
# Regenerates gpu/vk's bindings (vk.go, layout_test.go) from the Vulkan
# registry that Debian's libvulkan-dev installs. The output is committed;
# rerun after adding a command or structure to gpu/vk/internal/gen.
#
#   scripts/gpu/gen-vk.sh                      # /usr/share/vulkan/registry/vk.xml
#   VK_XML=/path/to/vk.xml scripts/gpu/gen-vk.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
go run ./gpu/vk/internal/gen -registry "${VK_XML:-/usr/share/vulkan/registry/vk.xml}" -out "${1:-gpu/vk}"
