#!/usr/bin/env bash
# Downloads the Debian packages vitrt builds against into .deps/ (git-ignored), so that
# scripts/device-check.sh can unpack them on the GPU machine, which has no package registry.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps && cd .deps
apt-get download libdnnl2 libdnnl-dev libspng0 libspng-dev nlohmann-json3-dev libcli11-dev libgtest-dev googletest \
  libjpeg62-turbo libjpeg62-turbo-dev libcpp-httplib-dev libcpp-httplib0.11 libbrotli-dev libbrotli1
# The CUTLASS wheel (its headers are extracted on the GPU machine by scripts/device-check.sh).
cd .. && scripts/fetch-cutlass.sh
