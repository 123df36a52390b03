#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60) from the
# seed corpus in tests/fuzz/corpus/<target> (copied: new inputs land in a
# scratch folder, not in the repo), as many at a time as there are cores.
# Fails when any target finds a crash, leak, sanitizer report or timeout;
# the reproducer is left in build/fuzz/artifacts/.
#
#   bash scripts/fuzz.sh            # 60 s per target (CI)
#   bash scripts/fuzz.sh 3600       # an hour per target
#   bash scripts/fuzz.sh 600 wire_fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-60}
shift || true
TARGETS=${*:-"wire_fuzz handshake_fuzz peer_table_fuzz shm_header_fuzz"}
if ! command -v clang++ >/dev/null; then
  apt-get install -y -q clang >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get install -y -q clang >/dev/null; }
fi
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j2 --target $TARGETS make_seeds
mkdir -p build/fuzz/artifacts
# One target a core at a time: each gets the seconds it is given on a core
# of its own, and the run ends sooner.
fuzz_one() {
  local t=$1 work rc=0
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$t"/. "$work"/ 2>/dev/null || true
  echo "fuzzing $t for ${SECONDS_PER}s ($(ls "$work" | wc -l) seeds)" \
    > "build/fuzz/$t.log"
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build/fuzz/tests/fuzz/$t" "$work" -max_total_time="$SECONDS_PER" \
    -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$t-" >> "build/fuzz/$t.log" 2>&1 || rc=$?
  rm -rf "$work"
  echo "$rc" > "build/fuzz/$t.rc"
}
cores=$(nproc)
running=0
for t in $TARGETS; do
  rm -f "build/fuzz/$t.rc"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$cores" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait
failed=""
for t in $TARGETS; do
  head -n 1 "build/fuzz/$t.log"
  tail -n +2 "build/fuzz/$t.log" | tail -n 12
  rc=$(cat "build/fuzz/$t.rc" 2>/dev/null || echo missing)
  if [ "$rc" != 0 ]; then echo "FAILED: $t (rc=$rc)"; failed="$failed $t"; fi
done
[ -z "$failed" ]
