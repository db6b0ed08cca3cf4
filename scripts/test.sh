#!/usr/bin/env bash
# Install atlas-mcp with its test extras into .venv (created if missing) and run the whole suite.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
# The inspector's browser tests drive Debian's chromium + chromedriver (never a downloaded
# browser). Install them only when missing and we may; otherwise those tests skip and say why.
if ! { command -v chromium && command -v chromedriver; } >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; } \
      >/dev/null || echo "chromium install failed: the inspector's browser tests will skip" >&2
  fi
fi
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exits 5 when it collected no tests: that is a failure here, not a pass.
exit $status
