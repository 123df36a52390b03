// KeepFreedMemory: afterwards a large block comes from glibc's heap, not a
// mapping of its own, and stays with the process when freed.
#include "runtime/process_memory.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HVD_SANITIZED_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HVD_SANITIZED_MALLOC 1
#endif
#endif

namespace horovod {
namespace {

TEST(ProcessMemory, LargeBlocksComeFromTheHeapAndStayWhenFreed) {
#ifdef HVD_SANITIZED_MALLOC
  GTEST_SKIP() << "a sanitizer's malloc replaces glibc's";
#else
  ASSERT_TRUE(KeepFreedMemory());
  constexpr size_t kBytes = 64 << 20;
  const size_t mapped_before = mallinfo2().hblkhd;
  char* block = static_cast<char*>(std::malloc(kBytes));
  ASSERT_NE(block, nullptr);
  std::memset(block, 1, kBytes);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "the block was mapped";
  std::free(block);
  EXPECT_GE(mallinfo2().fordblks, kBytes) << "the freed block was returned";
  // Idempotent: an engine started again sets it again.
  EXPECT_TRUE(KeepFreedMemory());
#endif
}

// The first call may be what initialises glibc's allocator (under a
// sanitizer nothing else does): threads that make it at once, as the
// ranks' engines of a test start, all get the same answer and exit cleanly
// (glibc checks the arenas they leave). A sanitizer's mallopt may refuse.
TEST(ProcessMemory, ThreadsSettingItAtOnceAllAgreeAndExitCleanly) {
  constexpr int kThreads = 8;
  std::atomic<int> started{0}, kept{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&] {
      started.fetch_add(1);
      while (started.load() < kThreads) {
      }
      if (KeepFreedMemory()) kept.fetch_add(1);
    });
  for (std::thread& t : threads) t.join();
  const bool in_effect = KeepFreedMemory();
  EXPECT_EQ(kept.load(), in_effect ? kThreads : 0);
#ifndef HVD_SANITIZED_MALLOC
  EXPECT_TRUE(in_effect);
#endif
}

}  // namespace
}  // namespace horovod
