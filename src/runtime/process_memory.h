// KeepFreedMemory: the one process-wide memory policy the engine sets.
//
// Frameworks allocate most collective results afresh (XLA every output,
// torch and TensorFlow every out-of-place result) with malloc, and glibc
// returns blocks of 32 MiB and more to the kernel when they are freed, so
// the next step faults them in again page by page: on a VM at about
// 0.4 GB/s, 170 ms per 64 MiB. Afterwards glibc serves large blocks from
// its heap and keeps freed memory for reuse, the trade a caching allocator
// makes: the process keeps the memory of its peak.
//
// Process-wide, set by the first call; thread-safe. A no-op where the C
// library is not glibc.
#ifndef HOROVOD_RUNTIME_PROCESS_MEMORY_H_
#define HOROVOD_RUNTIME_PROCESS_MEMORY_H_

namespace horovod {

// True when the policy is in effect.
bool KeepFreedMemory();

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_PROCESS_MEMORY_H_
