#!/usr/bin/env bash
# ctest entry of the browser test: finds Chromium, chromedriver and a Python with Selenium, or
# exits 77 (ctest: skipped) saying which is missing.
# Usage: run_browser_test.sh <vitrt binary> <fixtures dir> <build dir> <output dir>
set -uo pipefail
vitrt=$1 fixtures=$2 build=$3 out=$4
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "SKIPPED: $*"; exit 77; }
chromium=$(command -v chromium || command -v chromium-browser || true)
driver=$(command -v chromedriver || true)
[ -n "$chromium" ] || skip "chromium is not installed (Debian: apt-get install chromium chromium-driver)"
[ -n "$driver" ] || skip "chromedriver is not installed (Debian: apt-get install chromium-driver)"

py=""
for candidate in "${VITRT_PYTHON:-}" "$build/venv/bin/python" python3; do
  [ -n "$candidate" ] || continue
  if "$candidate" -c "import selenium" >/dev/null 2>&1; then py=$candidate; break; fi
done
[ -n "$py" ] || skip "no Python with selenium (scripts/test.sh installs it into $build/venv; or set VITRT_PYTHON)"

exec "$py" "$here/browser_test.py" --vitrt "$vitrt" --fixtures "$fixtures" --chromium "$chromium" \
  --chromedriver "$driver" --out "$out"
