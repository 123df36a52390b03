#include "runtime/process_memory.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace horovod {

bool KeepFreedMemory() {
#if defined(__GLIBC__)
  // No block through its own mmap (those are unmapped on free), and no
  // trimming of the heap's top back to the kernel. Set once per process:
  // the first mallopt may be what initialises glibc's allocator (under a
  // sanitizer, whose allocator serves every malloc, nothing else does), and
  // two threads initialising it at once each take its main arena as their
  // own, so that both detach from it at exit and glibc aborts on the
  // second (engines of several ranks start on threads in tests).
  static const bool kept =
      mallopt(M_MMAP_MAX, 0) == 1 && mallopt(M_TRIM_THRESHOLD, INT_MAX) == 1;
  return kept;
#else
  return false;
#endif
}

}  // namespace horovod
