#!/usr/bin/env bash
# install_deps.sh - installs the Debian 12 packages flashattn builds and tests with.
# As root it always runs apt-get (a fresh CI machine has none of them, and skipping the
# step when tools happen to be present would hide a missing package); otherwise it uses
# sudo when there is one, or names what is missing and fails.
set -euo pipefail

PACKAGES=(cmake ninja-build g++ gcc catch2 libopenblas-dev pkg-config ca-certificates python3)
# OpenBLAS's private libraries include -lgfortran: the pkg-config --static consumer links it.
PACKAGES+=(libgfortran-12-dev)
# The HIP backend, compile-checked for AMD targets without an AMD GPU: ROCm 5.2.3 headers,
# runtime and device libraries, and clang/lld/LLVM 19 (which know gfx942, gfx1100, gfx1201).
# clang-tools-19 has clang-offload-bundler (the HIP build and bench/amd_resources.py need
# it); llvm-19 has the unversioned llvm-objcopy in /usr/lib/llvm-19/bin it runs. Not
# Debian's unversioned llvm package: that is LLVM 14.
PACKAGES+=(hipcc libamdhip64-dev rocm-device-libs clang-19 lld-19 llvm-19 clang-tools-19)
# Ring attention's MPI transport (src/ring) and its tests under mpiexec: Open MPI.
PACKAGES+=(openmpi-bin libopenmpi-dev)
# libFuzzer and sanitizer runtimes for clang-19 (tests/fuzz)
PACKAGES+=(libclang-rt-19-dev)
# The Python package (python/, tests/python): Debian's torch (1.13: the autograd.Function
# path) and pytest; setuptools, wheel, pip and venv to pip-install it without a network.
PACKAGES+=(python3-torch python3-pytest python3-setuptools python3-wheel python3-pip python3-venv)
# The benchmark report (bench/report.py, tests/bench): schema validation, the plots, and
# the page loaded in a headless Chromium (its command line: no driver, no server).
PACKAGES+=(python3-jsonschema python3-matplotlib chromium)

install_with() { # install_with [sudo]: env passes the variable through sudo as well
  "$@" env DEBIAN_FRONTEND=noninteractive apt-get update
  "$@" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${PACKAGES[@]}"
}

if [ "$(id -u)" -eq 0 ]; then
  install_with
elif command -v sudo >/dev/null 2>&1; then
  install_with sudo
else
  missing=()
  for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "install_deps.sh: not root and no sudo; missing packages: ${missing[*]}" >&2
    exit 1
  fi
fi
