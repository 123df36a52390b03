// BufferPool: buffers for results a framework takes ownership of, kept when
// their last holder lets go and handed out again for a request of the same
// size.
//
// glibc's policy (process_memory.h) keeps freed memory for the threads that
// allocate from its main heap, but a framework's own worker threads each
// get an arena whose extra heaps are unmapped once emptied, and whose
// blocks larger than a heap (64 MiB) are mappings of their own: a result
// such a thread allocates for every call (TensorFlow's out-of-place
// results in a graph) is faulted in page by page every call. Results taken
// from here are faulted in once.
//
// Ownership: shared by its owner (the engine) and, weakly, by every buffer
// handed out; a buffer let go after the pool is gone is freed.
//
// Thread-safety: every method may be called from any thread.
#ifndef HOROVOD_RUNTIME_BUFFER_POOL_H_
#define HOROVOD_RUNTIME_BUFFER_POOL_H_

#include <horovod/engine.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace horovod {

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_idle_bytes` of let-go buffers (0: frees each).
  static std::shared_ptr<BufferPool> Make(size_t max_idle_bytes);

  // A buffer of `bytes`: a kept one of that size, or a new one. Throws
  // std::bad_alloc when there is no memory for a new one.
  std::shared_ptr<Buffer> Acquire(size_t bytes);

  // Bytes of the buffers kept, waiting to be handed out again.
  size_t idle_bytes() const;

 private:
  explicit BufferPool(size_t max_idle_bytes)
      : max_idle_bytes_(max_idle_bytes) {}
  // A handed-out buffer's last holder let go of it.
  void Keep(Buffer* buffer);

  const size_t max_idle_bytes_;
  mutable std::mutex mu_;
  std::unordered_map<size_t, std::vector<std::unique_ptr<Buffer>>> idle_;
  size_t idle_bytes_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_BUFFER_POOL_H_
