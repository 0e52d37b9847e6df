#!/usr/bin/env bash
# Coverage-guided fuzzing of vitrt's parsers (tests/fuzz/fuzz_*.cpp) with clang's libFuzzer,
# AddressSanitizer and UndefinedBehaviorSanitizer, in build-fuzz/ (CPU only, no CUDA).
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]    # default: 120 s, every target
#                               # (FUZZ_ARGS: more libFuzzer flags, e.g. "-len_control=0" for slow targets)
#   scripts/fuzz.sh --tests     # instead: the CPU test suite (labels unit, badinput, fidelity, server)
#                               # built and run under the same sanitizers (leak checking on)
#
# Each target starts from its seeds (the ctest's inputs) plus its working corpus in
# build-fuzz/corpus/<target> (kept between runs, not committed), with tests/fuzz/<target>.dict as its
# dictionary where there is one. A crash leaves its input in
# build-fuzz/findings/<target>/; once the bug is fixed, copy the input into tests/fuzz/corpus/<target>/
# so that the replay ctest (fuzz_replay_<target>, every build) keeps it fixed. Exit status: non-zero
# when any target found something.
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-120}
shift || true
B=build-fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
if [ ! -f $B/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B $B -DVITRT_WITH_CUDA=OFF -DVITRT_BUILD_FUZZERS=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$SAN -fsanitize=fuzzer-no-link" -DCMAKE_EXE_LINKER_FLAGS="$SAN" >/dev/null || exit 1
fi
if [ "${SECS}" = "--tests" ]; then
  cmake --build $B -j"$(nproc)" >$B/build.log 2>&1 || { grep -m20 "error" $B/build.log; exit 1; }
  export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir $B -j"$(nproc)" -L "unit|badinput|fidelity|server" --timeout 900 --output-on-failure | tail -15
  exit "${PIPESTATUS[0]}"
fi
all=$(ls tests/fuzz/fuzz_*.cpp | sed 's#.*/fuzz_\(.*\)\.cpp#\1#')
targets=${*:-$all}
cmake --build $B -j"$(nproc)" --target $(for t in $targets; do echo fuzz_$t; done) >$B/build.log 2>&1 || { tail -30 $B/build.log; exit 1; }
# Seeds per target: the ctest's fixture directories (tests/CMakeLists.txt, VITRT_FUZZ_SEEDS_<target>).
seeds() {
  sed -n "s/^set(VITRT_FUZZ_SEEDS_$1 \(.*\))$/\1/p" tests/CMakeLists.txt | tr ' ' '\n' |
    sed "s#\${VITRT_FIXTURES}#tests/fixtures#" | grep -v '^""$'
}
status=0
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1
for t in $targets; do
  mkdir -p $B/corpus/$t $B/findings/$t
  # Directories are corpora; single seed files are copied in.
  dirs=("$B/corpus/$t" "tests/fuzz/corpus/$t")
  for s in $(seeds $t); do
    if [ -d "$s" ]; then dirs+=("$s"); else cp "$s" "$B/corpus/$t/"; fi
  done
  dict=()
  [ -f tests/fuzz/$t.dict ] && dict=(-dict=tests/fuzz/$t.dict)
  echo "== fuzz_$t: ${SECS}s"
  $B/fuzz/fuzz_$t "${dirs[@]}" "${dict[@]}" -max_total_time="$SECS" -rss_limit_mb=4096 -malloc_limit_mb=2048 -timeout=20 \
    -artifact_prefix=$B/findings/$t/ -print_final_stats=1 ${FUZZ_ARGS:-} >$B/fuzz_$t.log 2>&1
  rc=$?
  grep -E "^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::new_units_added" $B/fuzz_$t.log | tail -3
  if [ $rc -ne 0 ]; then
    status=1
    echo "!! fuzz_$t found something (rc $rc): $(ls $B/findings/$t | head -3)"
    grep -m3 -E "ERROR: |runtime error|terminate|SUMMARY" $B/fuzz_$t.log
  fi
done
exit $status
