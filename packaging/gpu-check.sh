#!/usr/bin/env bash
# The GPU check: one script for a machine with an NVIDIA GPU and a Python with PyTorch (CUDA),
# but no Qt, no Debian -dev packages and no network. It
#   1. records what the machine has and lacks (the inventory) into its JSON,
#   2. builds core and the `npw` CLI (-DNPW_WITH_QT=OFF) against the LibTorch inside that
#      PyTorch (torch.utils.cmake_prefix_path), with the small libraries core needs (ICU,
#      nlohmann-json, zlib, stb) from a prefix made here beforehand (--prepare-deps),
#   3. runs packaging/gpu_check.py: CUDA against the CPU (forward float32 and bfloat16,
#      calibration statistics, scores and masks, prune/export/eval, layer-wise evaluation, the
#      out-of-memory message) and a benchmark (eval, prefill and decode tokens/s at TinyLlama's
#      1.1B shape, CPU and CUDA),
# all within a time limit it enforces (--time-limit, default 300 s), writing its JSON as it goes.
#
#   bash packaging/gpu-check.sh --prepare-deps      here, with apt (Debian): makes build-gpu-deps/
#   bash packaging/gpu-check.sh                     on the GPU machine (carry build-gpu-deps)
#   bash packaging/gpu-check.sh --dry-run           without a GPU: the same build steps against
#                                                   the CPU LibTorch, the CUDA checks skipped
# Options: --out DIR (default BUILD_DIR/out: gpu-check.json, gpu-check.log), --build-dir DIR
#   (default build-gpu-check),
#   --time-limit S, --npw PATH (use this npw: configure only, no build), --bench-size 1b|tiny.
# Exit: 0 every check passed (or was skipped for want of a GPU in a dry run), 1 a check failed or
# was cut off by the time limit, 2 the build or the setup failed.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
DEPS_DIR="$ROOT/build-gpu-deps"
BUILD="$ROOT/build-gpu-check"
OUT=""
TIME_LIMIT=300
DRY=0
NPW=""
BENCH_SIZE=1b
PREPARE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prepare-deps) PREPARE=1 ;;
    --dry-run) DRY=1 ;;
    --out) OUT="$2"; shift ;;
    --time-limit) TIME_LIMIT="$2"; shift ;;
    --npw) NPW="$2"; shift ;;
    --bench-size) BENCH_SIZE="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    *) echo "gpu-check: unknown option '$1'" >&2; exit 2 ;;
  esac
  shift
done

# ---- --prepare-deps: the small libraries core links, from Debian 12 packages, as one archive ----
# Headers and shared libraries only (no static libraries): ICU 72 (uc, i18n, data: 36 MB, 9 MB
# as .tar.xz), nlohmann-json 3.11, zlib 1.2.13, stb. Built for glibc 2.36, so they run on any
# newer glibc (the GPU image is Ubuntu 24.04's 2.39).
if [ "$PREPARE" = 1 ]; then
  set -e
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && apt-get download libicu72 libicu-dev nlohmann-json3-dev zlib1g zlib1g-dev libstb0 libstb-dev)
  for f in "$tmp"/*.deb; do dpkg-deb -x "$f" "$tmp/root"; done
  p="$tmp/prefix"
  mkdir -p "$p/lib" "$p/include" "$p/share"
  cp -a "$tmp/root/usr/include/." "$p/include/"
  cp -a "$tmp/root/usr/share/cmake" "$p/share/"  # nlohmann_jsonConfig.cmake
  for lib in libicuuc libicui18n libicudata libstb; do cp -a "$tmp/root/usr/lib/x86_64-linux-gnu/$lib".so* "$p/lib/"; done
  cp -a "$tmp"/root/lib/x86_64-linux-gnu/libz.so* "$tmp"/root/usr/lib/x86_64-linux-gnu/libz.so* "$p/lib/" 2>/dev/null || true
  # zlib1g-dev's libz.so points at /lib/...; make every development link relative.
  (cd "$p/lib" && for l in *.so; do t="$(readlink "$l" || true)"; [ -n "$t" ] && ln -sf "$(basename "$t")" "$l"; done)
  mkdir -p "$DEPS_DIR"
  tar -C "$p" -cJf "$DEPS_DIR/deps.tar.xz" .
  (cd "$tmp" && ls ./*.deb) >"$DEPS_DIR/packages.txt"
  echo "gpu-check: $DEPS_DIR/deps.tar.xz ($(du -h "$DEPS_DIR/deps.tar.xz" | cut -f1)); carry build-gpu-deps to the GPU machine"
  exit 0
fi

OUT="${OUT:-$BUILD/out}"
START=$(date +%s)
DEADLINE=$((START + TIME_LIMIT))
mkdir -p "$OUT" "$BUILD"
LOG="$OUT/gpu-check.log"
JSON="$OUT/gpu-check.json"
exec > >(tee -a "$LOG") 2>&1
echo "gpu-check: start $(date -u +%FT%TZ), limit ${TIME_LIMIT} s, $( [ $DRY = 1 ] && echo dry run || echo CUDA )"

# Python: the one holding PyTorch (the GPU image's plain python3; Debian's /usr/bin/python3 here).
PY=""
for c in python3 /usr/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch, numpy' 2>/dev/null; then PY="$(command -v "$c")"; break; fi
done
[ -z "$PY" ] && for c in python3 /usr/bin/python3; do command -v "$c" >/dev/null 2>&1 && "$c" -c 'import numpy' 2>/dev/null && PY="$(command -v "$c")" && break; done

# ---- 1. inventory ----
INVENTORY="$BUILD/inventory.json"
"${PY:-python3}" - "$INVENTORY" "$DRY" <<'EOF'
import json, os, shutil, subprocess, sys
def run(*a):
    try:
        p = subprocess.run(a, capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip().splitlines()[0] if (p.stdout + p.stderr).strip() else ""
    except Exception as e:
        return None
inv = {"tools": {}, "libraries": {}, "python": sys.executable}
for t in ["g++", "c++", "gcc", "clang++", "cmake", "ninja", "make", "pkg-config", "nvcc", "nvidia-smi", "git"]:
    path = shutil.which(t)
    inv["tools"][t] = {"path": path, "version": run(t, "--version") if path else None}
inv["nvidia_smi"] = run("nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader") if shutil.which("nvidia-smi") else None
try:
    import torch
    inv["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
                    "cmake_prefix_path": torch.utils.cmake_prefix_path,
                    "cxx11_abi": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
                    "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}
    tc = os.path.join(torch.utils.cmake_prefix_path, "Torch", "TorchConfig.cmake")
    inv["torch"]["torch_config"] = tc if os.path.exists(tc) else None
except Exception as e:
    inv["torch"] = {"error": str(e)}
try:
    import numpy
    inv["numpy"] = numpy.__version__
except Exception as e:
    inv["numpy"] = None
ld = run("sh", "-c", "ldconfig -p 2>/dev/null | grep -E 'libicuuc|libz\\.so|libstb|libopenblas|libcudnn|libcuda\\.so' | sed 's/ =>.*//' | tr -s ' \\t' ' ' | tr '\\n' ';'")
inv["ldconfig"] = ld
for h in ["/usr/include/zlib.h", "/usr/include/unicode/uversion.h", "/usr/include/nlohmann/json.hpp", "/usr/include/stb/stb_image.h"]:
    inv["libraries"][h] = os.path.exists(h)
for cuda in ["/usr/local/cuda", os.environ.get("CUDA_HOME", "")]:
    if cuda and os.path.isdir(cuda):
        inv["cuda_home"] = cuda
        inv["cuda_home_has"] = {d: os.path.exists(os.path.join(cuda, d)) for d in
                                ["bin/nvcc", "include/cuda_runtime_api.h", "include/cublas_v2.h", "include/nvToolsExt.h", "include/nvtx3", "lib64/libcudart.so"]}
        break
try:
    inv["os"] = dict(l.strip().split("=", 1) for l in open("/etc/os-release") if "=" in l).get("PRETTY_NAME", "").strip('"')
except Exception:
    inv["os"] = None
inv["glibc"] = run("ldd", "--version")
inv["cpus"] = os.cpu_count()
json.dump(inv, open(sys.argv[1], "w"), indent=1)
print("gpu-check: inventory:", json.dumps({k: inv[k] for k in ("os", "cpus", "python")}),
      "torch", inv["torch"].get("version"), "cuda", inv["torch"].get("cuda"), "gpu", inv["torch"].get("device"))
missing = [t for t in ["g++", "cmake"] if not inv["tools"][t]["path"]]
if missing: print("gpu-check: MISSING:", ", ".join(missing))
EOF

fail_setup() {
  echo "gpu-check: $*"
  "${PY:-python3}" - "$JSON" "$INVENTORY" "$*" <<'EOF'
import json, sys
inv = json.load(open(sys.argv[2])) if sys.argv[2] else {}
json.dump({"inventory": inv, "setup_error": sys.argv[3], "checks": [], "finished": True}, open(sys.argv[1], "w"), indent=1)
EOF
  exit 2
}
[ -n "$PY" ] || fail_setup "no python3 with numpy found (the checks read npw's outputs with it)"
if [ "$DRY" = 0 ] && ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  fail_setup "no CUDA device visible to PyTorch; use --dry-run on a machine without a GPU"
fi

# ---- 2. build core and the CLI ----
TORCH_PREFIX="$("$PY" -c 'import torch, os; p = torch.utils.cmake_prefix_path; print(p if os.path.exists(os.path.join(p, "Torch", "TorchConfig.cmake")) else "")' 2>/dev/null)"
PREFIXES="$TORCH_PREFIX"
if [ -f "$DEPS_DIR/deps.tar.xz" ]; then
  DEPS="$BUILD/deps"
  if [ ! -f "$DEPS/.unpacked" ] || [ "$DEPS_DIR/deps.tar.xz" -nt "$DEPS/.unpacked" ]; then
    rm -rf "$DEPS" && mkdir -p "$DEPS" && tar -C "$DEPS" -xJf "$DEPS_DIR/deps.tar.xz" && touch "$DEPS/.unpacked" ||
      fail_setup "could not unpack $DEPS_DIR/deps.tar.xz"
  fi
  PREFIXES="${PREFIXES:+$PREFIXES;}$DEPS"
  export LD_LIBRARY_PATH="$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: libraries from $DEPS_DIR/deps.tar.xz ($(tr '\n' ' ' <"$DEPS_DIR/packages.txt" 2>/dev/null))"
else
  echo "gpu-check: no $DEPS_DIR/deps.tar.xz (make it with --prepare-deps): the system's ICU, nlohmann-json, zlib and stb must do"
fi
[ -n "$TORCH_PREFIX" ] || echo "gpu-check: $PY's torch has no CMake config: using the system's LibTorch (find_package(Torch))"
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
CMAKE_ARGS=(-S "$ROOT" -B "$BUILD/cmake" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DNPW_WITH_QT=OFF -DNPW_BUILD_TESTS=OFF
  "-DCMAKE_PREFIX_PATH=$PREFIXES" -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON)  # as on the GPU image: no pkg-config
[ -n "${DEPS:-}" ] && CMAKE_ARGS+=("-DICU_ROOT=$DEPS" "-DZLIB_ROOT=$DEPS" "-DCMAKE_BUILD_RPATH=$DEPS/lib")
if command -v ccache >/dev/null 2>&1; then CMAKE_ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
T0=$(date +%s)
timeout $((DEADLINE - $(date +%s))) cmake "${CMAKE_ARGS[@]}" >"$BUILD/configure.log" 2>&1 ||
  { tail -30 "$BUILD/configure.log"; fail_setup "cmake configure failed (build-gpu-check/configure.log)"; }
grep -E "Found (ICU|ZLIB|nlohmann|Torch)|libstb|CUDA" "$BUILD/configure.log" | head -12
NPW_GIVEN="$NPW"
if [ -z "$NPW" ]; then
  left=$((DEADLINE - $(date +%s) - 60))  # keep a minute for the checks
  [ $left -gt 0 ] || fail_setup "no time left to build"
  timeout $left cmake --build "$BUILD/cmake" --target npw -j"$(nproc)" >"$BUILD/build.log" 2>&1 ||
    { tail -40 "$BUILD/build.log"; fail_setup "building npw failed or ran out of time (build-gpu-check/build.log)"; }
  NPW="$BUILD/cmake/app/npw"
fi
BUILD_SECONDS=$(( $(date +%s) - T0 ))
echo "gpu-check: configure$( [ -n "$NPW_GIVEN" ] || echo ' and build' ) ${BUILD_SECONDS} s; npw = $NPW"
"$NPW" --version || fail_setup "$NPW does not run"

# ---- 3. checks and benchmark ----
"$PY" - "$INVENTORY" "$BUILD_SECONDS" "$BUILD/meta.json" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" <<'EOF'
import json, sys
json.dump({"inventory": json.load(open(sys.argv[1])), "build_seconds": int(sys.argv[2]), "commit": sys.argv[4]},
          open(sys.argv[3], "w"))
EOF
DRY_FLAG=()
[ "$DRY" = 1 ] && DRY_FLAG=(--dry-run)
"$PY" "$ROOT/packaging/gpu_check.py" --npw "$NPW" --json "$JSON" --deadline "$DEADLINE" --work "$BUILD/work" \
  --meta "$BUILD/meta.json" --bench-size "$BENCH_SIZE" "${DRY_FLAG[@]}"
rc=$?
echo "gpu-check: done in $(( $(date +%s) - START )) s, exit $rc; $JSON"
exit $rc
