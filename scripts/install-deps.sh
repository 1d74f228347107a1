#!/usr/bin/env bash
# Installs what paritycheck needs on Debian 12. Run as root.
#   bash scripts/install-deps.sh          to build and run it: a compiler, CMake and five C
#                                         libraries (a few hundred MB at most)
#   bash scripts/install-deps.sh --test   also everything the tests use: cmocka, clang and its
#                                         sanitizer runtime, valgrind, h5py/numpy/torch/pytest
#                                         for the Python tests and the dumper, setuptools and venv
#                                         for `pip install ./python`, Chromium for the
#                                         HTML report test, help2man for the man page,
#                                         OpenMPI for the MPI build's tests
#   bash scripts/install-deps.sh --mpi    what to build with -DPC_MPI=ON: OpenMPI's library
#                                         and mpirun (docs/scale-out.md)
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(build-essential cmake pkg-config
      libhdf5-dev libgsl-dev libyaml-dev libjansson-dev libzip-dev)
if [[ ${1:-} == --test ]]; then
  pkgs+=(clang clang-format libclang-rt-14-dev libcmocka-dev hdf5-tools valgrind
         python3-h5py python3-numpy python3-yaml python3-pytest
         python3-setuptools python3-venv # pip install ./python, offline, in a venv (its pip)
         python3-torch               # the dumper and the Python package's tests (CPU)
         libxml2-utils chromium python3-pil # report tests: xmllint, headless Chromium, PNG decoding
         help2man man-db             # the man page, built from --help, rendered by man -l
         libopenmpi-dev openmpi-bin) # the MPI build (.ci/test.sh builds build-test with it)
elif [[ ${1:-} == --mpi ]]; then
  pkgs+=(libopenmpi-dev openmpi-bin)
elif [[ $# -gt 0 ]]; then
  echo "usage: bash scripts/install-deps.sh [--test | --mpi]" >&2
  exit 2
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
