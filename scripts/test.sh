#!/usr/bin/env bash
# The test suite: C++ (GoogleTest through ctest, warnings as errors) and
# Python (pytest, multi-rank through horovodrun, mpirun and torchrun).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# Google style, checked (not rewritten).
clang-format --dry-run --Werror $(git ls-files '*.cc' '*.h')

cmake -S . -B build/tests -G Ninja -DHOROVOD_BUILD_TESTS=ON -DHOROVOD_WERROR=ON \
  -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/tests -j2
(cd build/tests && ctest --output-on-failure --timeout 300)

# The same C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer.
cmake -S . -B build/asan -G Ninja -DHOROVOD_BUILD_TESTS=ON -DHOROVOD_WERROR=ON \
  -DHOROVOD_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/asan -j2
(cd build/asan && UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --output-on-failure --timeout 300)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
python3 -m pytest tests/python -v -p no:cacheprovider --timeout=300
