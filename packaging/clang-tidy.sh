#!/usr/bin/env bash
# Static analysis: Debian's clang-tidy (14 on Debian 12, 19 on 13) with the profile in .clang-tidy
# (bugprone, performance and a few modernize checks) over npw's own sources, in parallel. Prints
# each finding once (a header's finding is reported by every file that includes it) and a count
# per check; exits 1 on any finding, or on a file clang-tidy could not parse.
#
#   packaging/clang-tidy.sh                every .cpp of core/, app/, widgets/ and tests/
#   packaging/clang-tidy.sh FILE...        only these (paths from the repository root)
#   packaging/clang-tidy.sh --changed REF  the .cpp files changed since the merge base with REF,
#                                          and those whose header (same name, .h) changed; on REF
#                                          itself (HEAD is the merge base), the last commit's
#
# Uses the compile commands of the build directory (NPW_TIDY_BUILD, default build): if it has no
# compile_commands.json it is configured with CMAKE_EXPORT_COMPILE_COMMANDS=ON (nothing else
# changes in its cache, or in the compile lines: ccache still hits). The test suites include their
# moc output (tst_*.moc), which the build's <suite>_autogen targets write: they are built when
# missing (which builds the libraries a suite links, as the build itself would). The compile lines
# are g++'s: the script hands clang-tidy a copy without -Werror (compiler warnings are g++'s job,
# NPW_WERROR) and with the force-included precompiled header (cmake/npw_pch.cmake) replaced by its
# plain text, since clang cannot read g++'s .gch. NPW_TIDY_JOBS=N runs N at a time (default
# nproc); every clang-tidy runs under `nice` (NPW_TIDY_NICE, default 10). Installs clang-tidy with
# apt where it is missing (as packaging/setup.sh does for the build); exits 2 when it cannot.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
say() { echo "npw clang-tidy: $*" >&2; }

changed_base=""
files=()
while [ $# -gt 0 ]; do
  case "$1" in
    --changed) changed_base=${2:?--changed needs a git ref}; shift 2 ;;
    -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) files+=("$1"); shift ;;
  esac
done

# clang-tidy: the newest versioned one installed, else the unversioned; apt-get where none is.
tidy=""
find_tidy() {
  local v
  for v in 19 18 17 16 15 14; do
    if command -v "clang-tidy-$v" >/dev/null 2>&1; then tidy="clang-tidy-$v"; return 0; fi
  done
  if command -v clang-tidy >/dev/null 2>&1; then tidy=clang-tidy; return 0; fi
  return 1
}
if ! find_tidy; then
  SUDO=""
  if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
  if command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; then
    say "installing clang-tidy (Debian's)"
    $SUDO apt-get update -q >&2 &&
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends \
        clang-tidy >&2 || true
  fi
  find_tidy || { say "clang-tidy is not installed and could not be (apt-get install clang-tidy)"; exit 2; }
fi

build=${NPW_TIDY_BUILD:-build}
if [ ! -f "$build/compile_commands.json" ]; then
  say "configuring $build with CMAKE_EXPORT_COMPILE_COMMANDS=ON"
  generator=()
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
  cmake -S . -B "$build" "${generator[@]}" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi
out="$build/clang-tidy"
rm -rf "$out"
mkdir -p "$out/logs" "$out/pch"

# The files: the repository's own .cpp files, as the build compiles them.
if [ -n "$changed_base" ]; then
  base=$(git merge-base HEAD "$changed_base")
  if [ "$base" = "$(git rev-parse HEAD)" ]; then base=$(git rev-parse HEAD~1); fi  # on REF: its last commit
  mapfile -t changed < <(git diff --name-only --diff-filter=d "$base" -- core app widgets tests)
  for f in "${changed[@]}"; do
    case "$f" in
      *.cpp) files+=("$f") ;;
      *.h) [ -f "${f%.h}.cpp" ] && files+=("${f%.h}.cpp") ;;
    esac
  done
  if [ ${#files[@]} -eq 0 ]; then say "no .cpp or .h changed since $base"; exit 0; fi
fi
if [ ${#files[@]} -eq 0 ]; then
  mapfile -t files < <(git ls-files 'core/*.cpp' 'app/*.cpp' 'widgets/*.cpp' 'tests/*.cpp')
fi

# A compile database of those files: absolute paths, no -Werror, the precompiled header's text.
/usr/bin/python3 - "$build/compile_commands.json" "$out" "$root" "${files[@]}" >"$out/files" <<'EOF'
import json, os, shlex, shutil, sys
db_path, out, root, wanted = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
wanted = {os.path.realpath(os.path.join(root, f)) for f in sorted(set(wanted))}
entries, seen, pch_copies = [], set(), {}
for e in json.load(open(db_path)):
    path = os.path.realpath(os.path.join(e["directory"], e["file"]))
    if path not in wanted or path in seen:
        continue  # a file compiled into two targets is checked once
    seen.add(path)
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    kept, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-Werror", "-Winvalid-pch"):
            i += 1
            continue
        if a == "-include" and i + 1 < len(args) and args[i + 1].endswith("cmake_pch.hxx"):
            src = args[i + 1]
            if src not in pch_copies:
                dst = os.path.join(out, "pch", str(len(pch_copies)))
                os.makedirs(dst, exist_ok=True)
                dst = os.path.join(dst, "cmake_pch.hxx")
                shutil.copyfile(src, dst)  # without the .gch beside it
                pch_copies[src] = os.path.abspath(dst)
            kept += ["-include", pch_copies[src]]
            i += 2
            continue
        kept.append(a)
        i += 1
    entries.append({"directory": e["directory"], "file": path, "arguments": kept})
json.dump(entries, open(os.path.join(out, "compile_commands.json"), "w"), indent=1)
for p in sorted(wanted - seen):
    print("SKIP " + os.path.relpath(p, root))
for e in entries:
    print(e["file"])
EOF
mapfile -t skipped < <(sed -n 's/^SKIP //p' "$out/files")
mapfile -t targets < <(grep -v '^SKIP ' "$out/files" || true)
for f in "${skipped[@]}"; do say "not in $build's compile commands, skipped: $f"; done
if [ ${#targets[@]} -eq 0 ]; then say "nothing to check"; exit 0; fi

# The test suites' moc output (#include "tst_x.moc"), written by the build's autogen targets.
autogen=()
for f in "${targets[@]}"; do
  case "$f" in
    "$root"/tests/tst_*.cpp)
      name=$(basename "$f" .cpp)
      if grep -q "^#include \"$name.moc\"" "$f" && [ ! -f "$build/tests/${name}_autogen/include/$name.moc" ]; then
        autogen+=("${name}_autogen")
      fi ;;
  esac
done
if [ ${#autogen[@]} -gt 0 ]; then
  say "generating the moc output of ${#autogen[@]} test suites (their _autogen targets)"
  cmake --build "$build" --target "${autogen[@]}" >/dev/null
fi

jobs=${NPW_TIDY_JOBS:-$(nproc)}
export NPW_TIDY_EXE=$tidy NPW_TIDY_OUT=$out NPW_TIDY_ROOT=$root NPW_TIDY_NICE=${NPW_TIDY_NICE:-10}
say "$($tidy --version | grep -o 'version [0-9.]*'), ${#targets[@]} files, $jobs at a time"
start=$(date +%s)
printf '%s\0' "${targets[@]}" | xargs -0 -n1 -P "$jobs" bash -c '
  f=$1
  log="$NPW_TIDY_OUT/logs/$(echo "${f#"$NPW_TIDY_ROOT"/}" | tr / _).log"
  t0=$(date +%s)
  rc=0
  nice -n "$NPW_TIDY_NICE" "$NPW_TIDY_EXE" -p "$NPW_TIDY_OUT" --quiet \
    --header-filter="^$NPW_TIDY_ROOT/(core|app|widgets|tests)/" "$f" >"$log" 2>&1 || rc=$?
  times >"$log.cpu"  # the user and system time of this shell and of its children (clang-tidy)
  cpu=$(tail -1 "$log.cpu")
  echo "$rc $(( $(date +%s) - t0 )) ${cpu// /,} ${f#"$NPW_TIDY_ROOT"/}" >>"$NPW_TIDY_OUT/times"
' _
seconds=$(( $(date +%s) - start ))

# Each finding once, then the counts per check.
/usr/bin/python3 - "$out" "$root" "$seconds" <<'EOF'
import collections, glob, os, re, sys
out, root, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3])
line_re = re.compile(r"^(/[^:]+):(\d+):(\d+): (warning|error): (.*?)(?: \[([^\]]+)\])?$")
findings, failed = {}, []
def seconds_of(t):  # bash's `times`: 1m2.345s
    m, s = t.rstrip("s").split("m")
    return 60 * int(m) + float(s)
times = []
for line in open(os.path.join(out, "times")):
    rc, secs, cpu, name = line.rstrip("\n").split(" ", 3)
    times.append((name, int(secs), sum(seconds_of(t) for t in cpu.split(","))))
    if rc != "0":
        failed.append((name, rc))
for log in sorted(glob.glob(os.path.join(out, "logs", "*.log"))):
    for line in open(log, errors="replace"):
        m = line_re.match(line.rstrip("\n"))
        if not m:
            continue
        path, ln, col, kind, msg, check = m.groups()
        key = (os.path.relpath(path, root), int(ln), int(col), check or kind)
        findings.setdefault(key, msg)
per_check = collections.Counter(k[3] for k in findings)
for (path, ln, col, check), msg in sorted(findings.items()):
    print(f"{path}:{ln}:{col}: {msg} [{check}]")
slowest = max(times, key=lambda t: t[2])
print(f"\nclang-tidy: {len(times)} files in {seconds} s, {sum(t[2] for t in times):.0f} CPU seconds "
      f"(slowest {slowest[0]}, {slowest[2]:.0f} s); logs in {os.path.relpath(out, root)}/logs")
for check, n in per_check.most_common():
    print(f"  {n:5d}  {check}")
for name, rc in failed:
    print(f"  clang-tidy failed on {name} (exit {rc}): see its log")
print(f"clang-tidy: {len(findings)} finding(s), {len(failed)} file(s) failed")
sys.exit(1 if findings or failed else 0)
EOF
