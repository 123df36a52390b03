#include "runtime/buffer_pool.h"

namespace horovod {

std::shared_ptr<BufferPool> BufferPool::Make(size_t max_idle_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_idle_bytes));
}

std::shared_ptr<Buffer> BufferPool::Acquire(size_t bytes) {
  std::unique_ptr<Buffer> buffer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = idle_.find(bytes);
    if (it != idle_.end() && !it->second.empty()) {
      buffer = std::move(it->second.back());
      it->second.pop_back();
      idle_bytes_ -= bytes;
    }
  }
  if (!buffer) buffer = std::make_unique<Buffer>(bytes);
  std::weak_ptr<BufferPool> pool = weak_from_this();
  return std::shared_ptr<Buffer>(buffer.release(), [pool](Buffer* b) {
    if (std::shared_ptr<BufferPool> live = pool.lock())
      live->Keep(b);
    else
      delete b;
  });
}

size_t BufferPool::idle_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return idle_bytes_;
}

void BufferPool::Keep(Buffer* buffer) {
  // Declared before the lock: a buffer not kept is freed after unlocking.
  std::unique_ptr<Buffer> b(buffer);
  std::lock_guard<std::mutex> lock(mu_);
  if (idle_bytes_ + b->size() > max_idle_bytes_) return;
  idle_bytes_ += b->size();
  idle_[b->size()].push_back(std::move(b));
}

}  // namespace horovod
