#!/usr/bin/env bash
# Install atlas-mcp with its test extras into .venv (created if missing) and run the whole suite.
# Usage: bash scripts/test.sh [pytest args...]
# ATLAS_NO_BROWSER=1 skips the browser install (the inspector's browser tests then skip, saying why).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "scripts/test.sh: $*" >&2; }

say "installing into .venv/: this package (editable) and its test extras (pytest, hypothesis,"
say "  the elasticsearch client, jsonschema, selenium, pyyaml, ruff, mypy and stubs, and SQLCipher"
say "  (sqlcipher3-binary) with cryptography for the encryption-at-rest tests), from the package index"
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"

# The walk-through test (tests/install/) builds the sdist and wheel and starts the wheel the
# way Claude Desktop does: `uvx --offline --from WHEEL atlas-mcp`.
say "installing uv into .venv/ (builds the wheel and runs it through uvx --offline in tests/install/)"
.venv/bin/python -m pip install -q uv

# The inspector's browser tests drive Debian's chromium + chromedriver (never a downloaded
# browser). Install them only when missing, when we may, and when not told otherwise.
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ -n "${ATLAS_NO_BROWSER:-}" ]; then
    say "ATLAS_NO_BROWSER is set: not installing chromium; the browser tests will skip"
  elif [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium and chromium-driver with apt-get (the inspector's browser tests;"
    say "  set ATLAS_NO_BROWSER=1 to skip)"
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; } \
      >/dev/null || say "chromium install failed: the inspector's browser tests will skip"
  else
    say "chromium is missing and this is not root with apt-get: the inspector's browser tests will skip"
  fi
fi

# The importer tests drive the official MCP memory server (npm, small) to write and read real
# files. The heavier peers (mcp-memory-service, mem0, basic-memory: PyTorch and friends) are
# opt-in: `bash scripts/install_peers.sh --python`; without them their committed files are used.
say "installing the official MCP memory server from npm into .peers/ (the importer tests' live peer)"
bash scripts/install_peers.sh || say "could not install it: the importer tests' live parts will skip"

# Lint before the tests, so pytest's summary stays the last thing printed.
say "ruff check and ruff format --check (style gate; fix with: .venv/bin/ruff format . && .venv/bin/ruff check --fix .)"
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .

say "running pytest $*"
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
exit $status
