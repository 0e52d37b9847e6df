#!/usr/bin/env bash
# Installs everything vitrt needs to build and test on Debian 12 (bookworm). Idempotent.
set -euo pipefail
pkgs=(cmake g++ make pkg-config libgtest-dev libdnnl-dev nlohmann-json3-dev libcli11-dev libspng-dev
      libjpeg62-turbo-dev libpng-dev python3-skimage)
# `vitrt serve` (HTTP server; OpenSSL for content hashes), the Python package (venv + headers),
# and the browser test's headless Chromium with its WebDriver.
pkgs+=(libcpp-httplib-dev libssl-dev python3-dev python3-venv chromium chromium-driver)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "[vitrt] installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# CUTLASS / CuTe headers (PyPI's nvidia-cutlass wheel, pinned) for the CUDA build.
"$(dirname "$0")/fetch-cutlass.sh"
