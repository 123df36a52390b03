#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and runs each for SECONDS (default 60) from the
# seed corpus in tests/fuzz/corpus/<target> (copied: new inputs land in a
# scratch folder, not in the repo). Fails on the first crash, leak, sanitizer
# report or timeout; the reproducer is left in build/fuzz/artifacts/.
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
for t in $TARGETS; do
  work=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$t"/. "$work"/ 2>/dev/null || true
  echo "fuzzing $t for ${SECONDS_PER}s ($(ls "$work" | wc -l) seeds)"
  rc=0
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "build/fuzz/tests/fuzz/$t" "$work" -max_total_time="$SECONDS_PER" \
    -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="build/fuzz/artifacts/$t-" > "build/fuzz/$t.log" 2>&1 || rc=$?
  tail -n 12 "build/fuzz/$t.log"
  rm -rf "$work"
  if [ "$rc" -ne 0 ]; then echo "FAILED: $t (rc=$rc)"; exit 1; fi
done
