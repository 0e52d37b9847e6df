#!/usr/bin/env bash
# Lets a device run build exactly the committed tree (HEAD) while helpers have work in progress
# here: the device gets a copy of the working tree, uncommitted edits included, as they are at the
# moment of the call (not of any earlier snapshot).
#   scripts/device-pin-head.sh pack    # here: every tracked file as committed -> .devpin/
#   scripts/device-pin-head.sh apply   # on the device: restore them, delete files HEAD does not have
# .devpin/ must be git-ignored (.git/info/exclude) and named in the run's carry list. The big test
# fixtures are left out of the archive (they travel with the tree and helpers do not edit them).
set -euo pipefail
cd "$(dirname "$0")/.."
dirs=(src include tests bench python scripts docs cmake CMakeLists.txt pyproject.toml)
case "${1:-}" in
  pack)
    rm -rf .devpin && mkdir -p .devpin
    git ls-files > .devpin/files.txt
    git ls-files | grep -v '^tests/fixtures/' | tr '\n' '\0' | xargs -0 git archive -o .devpin/head.tar HEAD --
    echo "pinned HEAD $(git rev-parse --short HEAD) ($(du -h .devpin/head.tar | cut -f1))"
    ;;
  apply)
    [ -f .devpin/files.txt ] || { echo "no .devpin/ (carry it)"; exit 1; }
    { find "${dirs[@]}" -type f 2>/dev/null || true; } | { grep -vxF -f .devpin/files.txt || true; } | while read -r f; do rm -f -- "$f"; done
    tar -xf .devpin/head.tar
    echo "device tree pinned to the committed version"
    ;;
  *) echo "usage: $0 pack|apply"; exit 2 ;;
esac
