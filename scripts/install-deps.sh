#!/usr/bin/env bash
# Installs everything paritycheck needs to build and test on Debian 12. Run as root.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential cmake pkg-config clang clang-format libclang-rt-14-dev
      libhdf5-dev hdf5-tools libgsl-dev libcmocka-dev libyaml-dev libjansson-dev libzip-dev
      python3-h5py python3-numpy
      libxml2-utils chromium python3-pil # report tests: xmllint, headless Chromium, PNG decoding
      python3-torch python3-yaml  # the dumper test (torch on the CPU); tests/tolerance_model.py's YAML
      valgrind)                   # scripts/valgrind.sh: memcheck over the tests
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
