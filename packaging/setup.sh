#!/usr/bin/env bash
# Installs npw's dependencies (Debian packages only: Debian 12 "bookworm" or 13 "trixie", which
# use the same package names) and builds it into build/. Run as root (or with sudo available).
# Safe to run again: apt and CMake skip done work.
#
#   bash packaging/setup.sh              the CPU build (Debian's CPU-only LibTorch)
#   bash packaging/setup.sh --cuda       Debian 13 only: LibTorch with CUDA from Debian itself
#                                        (contrib's libtorch-cuda-dev and python3-torch-cuda,
#                                        non-free's nvidia-cuda-toolkit) instead of the CPU twins;
#                                        enables contrib and non-free for this release
#   bash packaging/setup.sh --no-build   install the packages only
#
# Once a CUDA LibTorch is installed, a plain run keeps it: the CPU twins conflict with it and
# would remove it. NPW_CUDNN_STUB=1 (with --cuda): TEST ONLY, see cudnn_stub below.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
say() { echo "npw setup: $*" >&2; }

CUDA=0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --cuda) CUDA=1 ;;
    --no-build) BUILD=0 ;;
    *) say "unknown option '$arg' (expected --cuda or --no-build)"; exit 1 ;;
  esac
done

CODENAME=""
if [ -r /etc/os-release ]; then CODENAME="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"; fi
case "$CODENAME" in
  bookworm) say "found Debian 12 (bookworm): Qt 6.4, LibTorch 1.13 (CPU only), g++ 12" ;;
  trixie) say "found Debian 13 (trixie): Qt 6.8, LibTorch 2.6, g++ 14" ;;
  *) say "found '${CODENAME:-an unknown system}', not Debian 12 (bookworm) or 13 (trixie): trying the same package names" ;;
esac

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
if [ "$CUDA" = 0 ] && installed libtorch-cuda-dev; then
  say "libtorch-cuda-dev (LibTorch with CUDA) is installed: keeping it (libtorch-dev would replace it)"
  CUDA=1
fi
if [ "$CUDA" = 1 ] && [ "$CODENAME" = bookworm ]; then
  say "Debian 12 has no CUDA build of LibTorch (libtorch-cuda-dev is in Debian 13's contrib section);"
  say "on Debian 12 use a LibTorch with CUDA from pytorch.org: cmake -DCMAKE_PREFIX_PATH=/path/to/libtorch"
  exit 1
fi

# liblapack-dev: the link-time LAPACK/BLAS that core/prune's float64 kernels call (CMake's FindLAPACK);
# Debian 12's libtorch-dev pulled it in, Debian 13's does not. At run time liblapack.so.3 is OpenBLAS.
COMMON=(cmake g++ make pkg-config
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 libstb-dev
  libopenblas0-pthread liblapack-dev nlohmann-json3-dev libicu-dev zlib1g-dev xvfb xauth
  bible-kjv jargon-text dataset-fashion-mnist python3-numpy python3-sentencepiece)
if [ "$CUDA" = 1 ]; then
  # nvidia-cuda-toolkit: the CUDA headers and CMake's CUDAToolkit that LibTorch's config needs.
  PACKAGES=("${COMMON[@]}" libtorch-cuda-dev python3-torch-cuda nvidia-cuda-toolkit)
else
  PACKAGES=("${COMMON[@]}" libtorch-dev python3-torch)
fi

# contrib and non-free for this release, where the CUDA packages live (added as one sources file
# of npw's own, beside the system's, with the mirror the system already uses).
enable_cuda_components() {
  local policy missing=() mirror
  policy="$(apt-cache policy)"
  for comp in contrib non-free; do
    grep -q " $CODENAME/$comp " <<<"$policy" || missing+=("$comp")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  mirror="$(awk -v s="$CODENAME/main" '$3 == s { print $2; exit }' <<<"$policy")"
  mirror="${mirror:-http://deb.debian.org/debian}"
  say "enabling ${missing[*]} for $CODENAME ($mirror) in /etc/apt/sources.list.d/npw-cuda.sources"
  $SUDO tee /etc/apt/sources.list.d/npw-cuda.sources >/dev/null <<EOF
Types: deb
URIs: $mirror
Suites: $CODENAME
Components: ${missing[*]}
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $SUDO apt-get update -q
}

# Debian's nvidia-cudnn holds no library: when configured it downloads cuDNN from NVIDIA
# (developer.download.nvidia.com, after you accept NVIDIA's license). Where that site cannot be
# reached its configuration would fail and leave dpkg half-done, so it is then installed with the
# license question declined (no download); `dpkg-reconfigure nvidia-cudnn` fetches it later.
CUDNN_SITE=developer.download.nvidia.com
if [ "$CUDA" = 1 ] && ! installed nvidia-cudnn; then
  if timeout 10 bash -c ":</dev/tcp/$CUDNN_SITE/443" 2>/dev/null; then
    say "nvidia-cudnn will download cuDNN 9 from $CUDNN_SITE; installing it accepts NVIDIA's cuDNN license"
  else
    say "$CUDNN_SITE cannot be reached: Debian's nvidia-cudnn cannot download cuDNN here."
    say "Installing it without the download (its license question answered 'I Decline')."
    echo "nvidia-cudnn nvidia-cudnn/question select I Decline" | $SUDO debconf-set-selections
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  $SUDO apt-get update -q
  if [ "$CUDA" = 1 ]; then enable_cuda_components; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}"
fi
BUILD_DIR="${NPW_BUILD_DIR:-build}"
EXTRA_CMAKE=()

# LibTorch's CUDA library needs cuDNN (libcudnn.so.9) to link and load.
cudnn_stub() {
  # TEST ONLY (NPW_CUDNN_STUB=1): a stand-in libcudnn.so.9 in the build folder, whose every
  # function aborts with a message. It lets the CUDA LibTorch link and load on a machine without
  # a GPU (and without cuDNN), so the suite runs on the CPU; nothing here calls cuDNN without a GPU.
  # It is never installed; the executables find it through their RPATH (DT_RPATH, which also
  # serves libtorch_cuda's own dependencies). Never use such a build on a GPU.
  local dir="$PWD/$BUILD_DIR/cudnn-stub" lib
  lib="$(ldconfig -p | awk '/libtorch_cuda\.so / { print $NF; exit }')"
  if [ -z "$lib" ]; then say "libtorch_cuda.so not found (is libtorch-cuda-dev installed?)"; exit 1; fi
  mkdir -p "$dir"
  {
    echo '/* TEST-ONLY stand-in for cuDNN 9, generated by packaging/setup.sh (NPW_CUDNN_STUB=1). */'
    echo '#include <stdio.h>'
    echo '#include <stdlib.h>'
    echo 'static void npw_cudnn_stub_called(const char* f) { fprintf(stderr, "npw: %s called: this build links a TEST-ONLY cuDNN stand-in (NPW_CUDNN_STUB=1); install cuDNN 9\\n", f); abort(); }'
    nm -D --undefined-only "$lib" | awk '$2 ~ /^cudnn/ { print $2 }' | sed 's/@.*//' | sort -u |
      while read -r f; do echo "void $f(void) { npw_cudnn_stub_called(\"$f\"); }"; done
  } >"$dir/cudnn_stub.c"
  # libtorch_cuda asks for versioned symbols (cudnnCreate@libcudnn.so.9, as NVIDIA's library
  # exports them): the stand-in exports its functions under that version node too.
  printf 'libcudnn.so.9 {\n  global: cudnn*;\n  local: *;\n};\n' >"$dir/cudnn_stub.map"
  cc -shared -fPIC -o "$dir/libcudnn.so.9" -Wl,-soname,libcudnn.so.9 -Wl,--version-script="$dir/cudnn_stub.map" \
    "$dir/cudnn_stub.c"
  say "TEST ONLY: linking against a stand-in cuDNN ($dir/libcudnn.so.9, $(grep -c '^void' "$dir/cudnn_stub.c") functions that abort)"
  EXTRA_CMAKE+=("-DCMAKE_EXE_LINKER_FLAGS=-L$dir -Wl,-rpath-link,$dir -Wl,--disable-new-dtags -Wl,-rpath,$dir"
                "-DCMAKE_SHARED_LINKER_FLAGS=-L$dir -Wl,-rpath-link,$dir")
}
if [ "$CUDA" = 1 ] && ! ldconfig -p | grep -q 'libcudnn\.so\.9 '; then
  if [ "${NPW_CUDNN_STUB:-0}" = 1 ]; then
    cudnn_stub
  else
    say "cuDNN 9 (libcudnn.so.9) is missing, and LibTorch's CUDA library cannot link or load without it."
    say "Debian's nvidia-cudnn downloads it from $CUDNN_SITE when configured. With network access:"
    say "  dpkg-reconfigure nvidia-cudnn   (accept NVIDIA's cuDNN license), then run this again."
    say "TEST ONLY, on a machine without a GPU: NPW_CUDNN_STUB=1 bash packaging/setup.sh --cuda"
    say "  links a stand-in cuDNN whose functions abort, so that npw and its tests run on the CPU."
    exit 1
  fi
fi
if [ "$BUILD" = 0 ]; then exit 0; fi

# ccache, where installed, makes rebuilds after a checkout quick; it is not required.
LAUNCHER=""
if command -v ccache >/dev/null 2>&1; then LAUNCHER="-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"; fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo $LAUNCHER "${EXTRA_CMAKE[@]}" ${NPW_CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j"$(nproc)"
# The real llama.cpp for tests/tst_gguf_llamacpp (npm's node-llama-cpp, prebuilt CPU binary, 85 MB,
# ~20 s): only where Node and npm are installed; the suite is skipped otherwise. `npm install`
# with the committed lock (npm 11's `npm ci` rejects a lock whose optional per-platform packages
# were omitted); --omit=optional leaves out the CUDA/Vulkan/macOS/Windows builds (640 MB).
# NPW_LLAMACPP=0 skips it.
if [ "${NPW_LLAMACPP:-1}" != "0" ] && command -v npm >/dev/null 2>&1 && command -v node >/dev/null 2>&1; then
  if [ ! -f tests/fixtures/llamacpp/node_modules/node-llama-cpp/package.json ]; then
    echo "npw setup: installing node-llama-cpp into tests/fixtures/llamacpp" >&2
    (cd tests/fixtures/llamacpp && npm install --omit=optional --no-audit --no-fund --loglevel=error) ||
      echo "npw setup: WARNING: node-llama-cpp could not be installed; tst_gguf_llamacpp will be skipped" >&2
  fi
fi
