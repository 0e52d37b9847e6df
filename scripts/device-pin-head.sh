#!/usr/bin/env bash
# Lets a device run build exactly the committed tree (HEAD) while helpers have work in progress
# here: the device gets a copy of the working tree, uncommitted edits included.
#   scripts/device-pin-head.sh pack    # here: HEAD's version of every changed file -> .devpin/
#   scripts/device-pin-head.sh apply   # on the device: restore those files, delete untracked ones
# .devpin/ must be git-ignored (.git/info/exclude) and named in the run's carry list.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  pack)
    rm -rf .devpin && mkdir -p .devpin
    git diff --name-only HEAD > .devpin/changed.txt
    git ls-files --others --exclude-standard > .devpin/untracked.txt
    # Deleted-here files come back too; files new in the working tree are removed on apply.
    if [ -s .devpin/changed.txt ]; then git archive -o .devpin/head.tar HEAD $(cat .devpin/changed.txt); fi
    echo "pinned HEAD $(git rev-parse --short HEAD): $(wc -l < .devpin/changed.txt) changed, $(wc -l < .devpin/untracked.txt) untracked"
    ;;
  apply)
    [ -f .devpin/untracked.txt ] || { echo "no .devpin/ (carry it)"; exit 1; }
    while read -r f; do rm -f -- "$f"; done < .devpin/untracked.txt
    [ -f .devpin/head.tar ] && tar -xf .devpin/head.tar
    echo "device tree pinned to the committed version"
    ;;
  *) echo "usage: $0 pack|apply"; exit 2 ;;
esac
