#!/usr/bin/env bash
# Fuzzes npw's own parsers (issue 16). Configures and builds a separate tree with clang and
# -DNPW_FUZZ=ON (only core and tests/fuzz's harnesses, with libFuzzer,
# AddressSanitizer and UBSan), makes each harness's seed corpus from the fixtures
# (tests/fuzz/make_seeds.py), runs every harness for SECONDS, and prints executions and
# executions per second. A finding stops that harness and leaves the input under
# BUILD/fuzz-artifacts/<harness>/: add it to tests/fuzz/regressions/<target>/ (the CTest suite
# tst_fuzz_regressions replays that folder) once it is fixed.
#
#   packaging/fuzz.sh [SECONDS] [TARGET...]     # default 60 s each, every target
#
# Needs Debian's clang and libclang-rt-14-dev (with --no-install-recommends the runtime is not
# pulled in). NPW_FUZZ_BUILD=DIR picks the build directory (default build-fuzz); NPW_FUZZ_JOBS=N
# runs N workers per harness (libFuzzer -fork; default 1); NPW_FUZZ_RUNS=N stops a harness after
# N executions (before SECONDS if it is faster: the issue's bar is 10^6). The corpus grows in
# BUILD/fuzz-corpus/<target> and is reused by the next run.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
build=${NPW_FUZZ_BUILD:-build-fuzz}
jobs=${NPW_FUZZ_JOBS:-1}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors gguf torch_checkpoint tokenizer_json config_json llama2c idx tokenizer_files
                                        tiktoken tokenizer_bin text_dataset zeroshot manifest workspace)

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$build" -DNPW_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null

/usr/bin/python3 tests/fuzz/make_seeds.py "$build/fuzz-seeds"

# LeakSanitizer off: LibTorch's static registries are never freed (not a finding of npw's).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

printf '%-18s %8s %12s %9s %8s  %s\n' harness seconds executions exec/s corpus result
status=0
for target in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$target"
  artifacts="$build/fuzz-artifacts/$target"
  log="$build/fuzz-logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  extra=()
  [ "$jobs" -gt 1 ] && extra=(-fork="$jobs" -ignore_crashes=0)
  [ -n "${NPW_FUZZ_RUNS:-}" ] && extra+=(-runs="$NPW_FUZZ_RUNS")
  start=$(date +%s)
  set +e
  "$build/tests/fuzz/fuzz_$target" "$corpus" "$build/fuzz-seeds/$target" -max_total_time="$seconds" \
    -timeout=20 -rss_limit_mb=2560 -max_len=262144 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "${extra[@]}" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  speed=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  result="clean"
  if [ $rc -ne 0 ]; then
    result="FINDING (exit $rc): see $log and $artifacts/"
    status=1
  fi
  printf '%-18s %8s %12s %9s %8s  %s\n' "$target" "$(( $(date +%s) - start ))" "${runs:-?}" "${speed:-?}" "$(ls "$corpus" | wc -l)" "$result"
done
exit $status
