// BufferPool: let-go buffers come back for requests of their size, up to
// the pool's cap; held ones never do; buffers outlive the pool.
#include "runtime/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace horovod {
namespace {

TEST(BufferPool, ALetGoBufferComesBackForItsSizeOnly) {
  auto pool = BufferPool::Make(1 << 20);
  std::shared_ptr<Buffer> a = pool->Acquire(1000);
  ASSERT_EQ(a->size(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 64, 0u);
  void* first = a->data();
  std::shared_ptr<Buffer> held = pool->Acquire(1000);
  EXPECT_NE(held->data(), first);
  a.reset();
  EXPECT_EQ(pool->idle_bytes(), 1000u);
  std::shared_ptr<Buffer> other = pool->Acquire(2000);
  EXPECT_NE(other->data(), first);
  EXPECT_EQ(pool->idle_bytes(), 1000u);
  std::shared_ptr<Buffer> again = pool->Acquire(1000);
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(pool->idle_bytes(), 0u);
}

TEST(BufferPool, KeepsNoMoreThanItsCap) {
  auto pool = BufferPool::Make(1500);
  std::shared_ptr<Buffer> a = pool->Acquire(1000), b = pool->Acquire(1000);
  a.reset();
  b.reset();
  EXPECT_EQ(pool->idle_bytes(), 1000u);
  auto none = BufferPool::Make(0);
  none->Acquire(64).reset();
  EXPECT_EQ(none->idle_bytes(), 0u);
}

TEST(BufferPool, BuffersOutliveThePool) {
  auto pool = BufferPool::Make(1 << 20);
  std::shared_ptr<Buffer> b = pool->Acquire(4096);
  std::memset(b->data(), 7, b->size());
  pool.reset();
  EXPECT_EQ(static_cast<unsigned char*>(b->data())[4095], 7);
  b.reset();  // freed, with no pool to keep it
}

TEST(BufferPool, ThreadsAcquireAndLetGoAtOnce) {
  auto pool = BufferPool::Make(1 << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&pool, t] {
      for (int i = 0; i < 2000; ++i) {
        std::shared_ptr<Buffer> b = pool->Acquire(64 * (1 + (i + t) % 4));
        static_cast<char*>(b->data())[0] = static_cast<char>(t);
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_LE(pool->idle_bytes(), size_t{1} << 20);
  EXPECT_GT(pool->idle_bytes(), 0u);
}

}  // namespace
}  // namespace horovod
