#!/usr/bin/env bash
# Installs what packaging/fuzz.sh needs beyond setup.sh: Debian's clang and its libFuzzer /
# sanitizer runtimes (libclang-rt-14-dev: with --no-install-recommends clang does not pull it
# in). Same pattern as setup.sh: only what is missing, apt from Debian only. Exits 0 when the
# tools are there (or were installed), 1 when they are not and cannot be installed (no root,
# no apt, no network): the fuzz step is optional, so its caller skips it then.
set -uo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
fi
PACKAGES=(clang libclang-rt-14-dev)
have_tools() {
  # clang, and libFuzzer's runtime where clang 14 looks for it.
  command -v clang++ >/dev/null 2>&1 &&
    ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1
}
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
    echo "npw setup-fuzz: ${missing[*]} missing and no root to install them" >&2
  elif command -v apt-get >/dev/null 2>&1; then
    echo "npw setup-fuzz: installing ${missing[*]}" >&2
    $SUDO apt-get update -q >&2 &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
        "${missing[@]}" >&2 ||
      echo "npw setup-fuzz: could not install ${missing[*]}" >&2
  fi
fi
have_tools
