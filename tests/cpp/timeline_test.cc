#include "timeline/timeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

namespace horovod {
namespace {

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos;
       at = s.find(what, at + 1))
    ++n;
  return n;
}

std::string TempPath(const char* name) {
  return ::testing::TempDir() + name + std::to_string(getpid()) + ".json";
}

TEST(Timeline, RecordsSpansAndClosesThemOnStop) {
  const std::string path = TempPath("timeline_spans");
  Timeline t;
  EXPECT_FALSE(t.active());
  t.NegotiateTick("ignored", "ALLREDUCE", 0);  // off: nothing recorded
  ASSERT_TRUE(t.Start(path, /*mark_cycles=*/true).ok());
  EXPECT_TRUE(t.active());
  const std::string odd = "w\"eird\\name\n";
  t.NegotiateTick(odd, "ALLREDUCE", 1);
  t.NegotiateTick(odd, "ALLREDUCE", 0);
  t.OpStart(odd, "ALLREDUCE");
  t.Activity(odd, "MEMCPY_IN_FUSION_BUFFER");
  t.Activity(odd, "SHM_ALLREDUCE");
  t.OpEnd(odd);
  t.MarkCycleStart();
  t.NegotiateTick("open", "BROADCAST", 0);  // still negotiating at Stop
  t.Stop();
  EXPECT_FALSE(t.active());
  std::string s = Read(path);
  ASSERT_GE(s.size(), 4u);
  EXPECT_EQ(s.front(), '[');
  EXPECT_EQ(s.substr(s.size() - 3), "\n]\n");
  EXPECT_NE(s.find("\"name\":\"w\\\"eird\\\\name\\u000a\""), std::string::npos)
      << s;
  EXPECT_EQ(Count(s, "\"NEGOTIATE_ALLREDUCE\""), 1);
  EXPECT_EQ(Count(s, "\"ph\":\"X\""), 3);  // a tick per rank and tensor
  EXPECT_EQ(Count(s, "\"QUEUE\""), 1);
  EXPECT_EQ(Count(s, "\"SHM_ALLREDUCE\""), 1);
  EXPECT_EQ(Count(s, "\"CYCLE_START\""), 1);
  // NEGOTIATE, ALLREDUCE, QUEUE, MEMCPY, SHM + NEGOTIATE_BROADCAST.
  EXPECT_EQ(Count(s, "\"ph\":\"B\""), 6);
  EXPECT_EQ(Count(s, "\"ph\":\"E\""), 6);
  EXPECT_EQ(Count(s, "\"ignored\""), 0);
  // After Stop nothing more is written.
  t.NegotiateTick("late", "ALLREDUCE", 0);
  EXPECT_EQ(Read(path), s);
  unlink(path.c_str());
}

TEST(Timeline, FileIsCompleteWheneverItIsRead) {
  const std::string path = TempPath("timeline_live");
  Timeline t;
  ASSERT_TRUE(t.Start(path, false).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (int i = 0; !done.load(); ++i) {
      std::string name = "t" + std::to_string(i % 50);
      t.NegotiateTick(name, "ALLREDUCE", 0);
      t.OpStart(name, "ALLREDUCE");
      t.OpEnd(name);
    }
  });
  int reads = 0, bad = 0;
  size_t first = 0, last = 0;
  auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  while (std::chrono::steady_clock::now() < until && bad == 0) {
    std::string s = Read(path);
    // Whole events only; at most the one tensor in flight (its operation
    // and QUEUE) has spans open.
    int open = Count(s, "\"ph\":\"B\"") - Count(s, "\"ph\":\"E\"");
    if (s.size() < 4 || s.front() != '[' || s.substr(s.size() - 3) != "\n]\n" ||
        open < 0 || open > 2) {
      ADD_FAILURE() << "torn or unbalanced file: " << s.substr(s.size() - 200);
      ++bad;
    }
    if (reads++ == 0) first = s.size();
    last = s.size();
  }
  done = true;
  writer.join();
  t.Stop();
  EXPECT_GT(last, first);  // published while running, not only at Stop
  unlink(path.c_str());
}

TEST(Timeline, RestartReplacesTheFileAndBadPathsFail) {
  const std::string a = TempPath("timeline_a"), b = TempPath("timeline_b");
  Timeline t;
  ASSERT_TRUE(t.Start(a, false).ok());
  t.NegotiateTick("x", "ALLREDUCE", 0);
  ASSERT_TRUE(t.Start(b, false).ok());  // finishes a first
  std::string sa = Read(a);
  EXPECT_EQ(Count(sa, "\"ph\":\"B\""), 1);
  EXPECT_EQ(Count(sa, "\"ph\":\"E\""), 1);
  t.Stop();
  EXPECT_EQ(Count(Read(b), "\"x\""), 0);
  EXPECT_FALSE(t.Start("/nonexistent-dir/t.json", false).ok());
  EXPECT_FALSE(t.active());
  unlink(a.c_str());
  unlink(b.c_str());
}

}  // namespace
}  // namespace horovod
