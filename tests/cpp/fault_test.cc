// Fault injection with real processes: the test forks three ranks, and once
// they are up it kills one (SIGKILL) or stops it (SIGSTOP) in the middle of
// 64 MiB allreduces, while the others wait for it in negotiation, or while
// the job is idle. Every survivor must fail with an error naming the victim:
// within 5 s of a kill, within the operation timeout (2 s here) plus a
// margin of a stop. Over TCP and over shared memory.
#include <gtest/gtest.h>
#include <horovod/engine.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "test_job.h"

namespace horovod {
namespace {

using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC: one per machine

constexpr int kRanks = 3;
constexpr double kOperationTimeoutS = 2;

enum class When { kMidAllreduce, kNegotiation, kIdle };

struct Fault {
  int signal;
  When when;
  int victim;
  bool shm;
};

std::string Describe(const Fault& f) {
  const char* when[] = {"MidAllreduce", "Negotiation", "Idle"};
  return std::string(f.signal == SIGKILL ? "Kill" : "Stop") +
         when[static_cast<int>(f.when)] + "Rank" + std::to_string(f.victim) +
         (f.shm ? "Shm" : "Tcp");
}

double Now() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

void Report(int fd, const std::string& line) {
  std::string s = line + "\n";
  if (write(fd, s.data(), s.size()) < 0) _exit(3);
}

// One rank's life in a forked child. Survivors report "raised <time>
// <message>" (or "ok"); the victim just keeps going until the signal lands.
[[noreturn]] void RankMain(const Fault& f, int rank, int port, int ready_fd,
                           int report_fd) {
  const JobInfo job = LoopbackJob(rank, kRanks, port, "fault-test-secret");
  Knobs knobs;
  knobs.shm_disable = !f.shm;
  knobs.operation_timeout_s = 2;
  std::unique_ptr<Engine> e;
  Status st = Engine::Start(job, knobs, &e);
  if (!st.ok()) {
    Report(report_fd, "start failed: " + st.ToString());
    _exit(1);
  }
  std::vector<float> big(16 << 20, 1.0f);  // 64 MiB
  TensorView bt{big.data(), DataType::kFloat32, {16 << 20}};
  float one = 1;
  TensorView small{&one, DataType::kFloat32, {1}};
  CollectiveArgs args;
  args.name = "warmup";
  Handle h;
  st = e->Allreduce(small, args, &h);
  if (st.ok()) st = h.Wait(30);
  if (!st.ok()) {
    Report(report_fd, "warmup failed: " + st.ToString());
    _exit(1);
  }
  if (write(ready_fd, "r", 1) != 1) _exit(3);
  const bool victim = rank == f.victim;
  if (f.when == When::kIdle || (f.when == When::kNegotiation && victim)) {
    // Idle until well after the signal; the victim never submits.
    std::this_thread::sleep_for(
        std::chrono::milliseconds(victim ? 60000 : 500));
  }
  for (int i = 0; i < 1000; ++i) {
    const bool use_big = f.when == When::kMidAllreduce;
    args.name = "t." + std::to_string(i);
    st = e->Allreduce(use_big ? bt : small, args, &h);
    if (st.ok()) st = h.Wait(60);
    if (!st.ok()) break;
  }
  const double at = Now();
  if (st.ok()) {
    Report(report_fd, "ok");
  } else {
    char head[64];
    std::snprintf(head, sizeof(head), "raised %.6f ", at);
    Report(report_fd, head + st.message());
  }
  // Skip the engine's destructor: its shutdown handshake would wait on the
  // victim; the kernel closes everything.
  _exit(0);
}

struct Child {
  pid_t pid = -1;
  int report = -1;  // read end
  std::string text;
};

class FaultTest : public ::testing::TestWithParam<Fault> {};

TEST_P(FaultTest, EverySurvivorFailsInBoundedTimeNamingTheVictim) {
  const Fault f = GetParam();
  const int port = FreePort();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  std::vector<Child> children(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    int rep[2];
    ASSERT_EQ(pipe(rep), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(ready[0]);
      close(rep[0]);
      RankMain(f, r, port, ready[1], rep[1]);
    }
    close(rep[1]);
    children[r].pid = pid;
    children[r].report = rep[0];
  }
  close(ready[1]);
  auto kill_all = [&] {
    for (auto& c : children) kill(c.pid, SIGKILL);
    for (auto& c : children) waitpid(c.pid, nullptr, 0);
  };
  // Every rank up and warmed; then let the survivors get into the phase
  // under test before the signal.
  int up = 0;
  const auto start_by = Clock::now() + std::chrono::seconds(60);
  while (up < kRanks && Clock::now() < start_by) {
    pollfd p = {ready[0], POLLIN, 0};
    char c;
    if (poll(&p, 1, 100) > 0 && read(ready[0], &c, 1) == 1) ++up;
  }
  close(ready[0]);
  if (up < kRanks) {
    kill_all();
    FAIL() << "only " << up << " ranks started";
  }
  std::this_thread::sleep_for(
      std::chrono::milliseconds(f.when == When::kMidAllreduce ? 150 : 200));
  const double signalled = Now();
  kill(children[f.victim].pid, f.signal);
  // Collect the survivors' reports (bounded: a hang fails the test).
  const auto report_by = Clock::now() + std::chrono::seconds(30);
  for (int r = 0; r < kRanks; ++r) {
    if (r == f.victim) continue;
    Child& c = children[r];
    while (c.text.find('\n') == std::string::npos && Clock::now() < report_by) {
      pollfd p = {c.report, POLLIN, 0};
      char buf[4096];
      if (poll(&p, 1, 100) <= 0) continue;
      ssize_t n = read(c.report, buf, sizeof(buf));
      if (n <= 0) break;
      c.text.append(buf, static_cast<size_t>(n));
    }
  }
  kill_all();
  const double bound = f.signal == SIGKILL ? 5.0 : kOperationTimeoutS + 3.0;
  const std::string victim = "rank " + std::to_string(f.victim);
  for (int r = 0; r < kRanks; ++r) {
    if (r == f.victim) continue;
    const std::string& t = children[r].text;
    ASSERT_EQ(t.rfind("raised ", 0), 0u) << "rank " << r << ": " << t;
    const double took = std::stod(t.substr(7)) - signalled;
    std::printf("%s: rank %d failed %.3f s after the signal: %s",
                Describe(f).c_str(), r, took, t.c_str() + 7);
    EXPECT_LT(took, bound) << "rank " << r << ": " << t;
    EXPECT_NE(t.find(victim), std::string::npos) << "rank " << r << ": " << t;
  }
  for (auto& c : children) close(c.report);
}

std::vector<Fault> AllFaults() {
  std::vector<Fault> v;
  for (bool shm : {false, true})
    for (int sig : {SIGKILL, SIGSTOP})
      for (When w : {When::kMidAllreduce, When::kNegotiation, When::kIdle})
        v.push_back({sig, w, 2, shm});
  // The coordinator itself.
  for (bool shm : {false, true})
    for (int sig : {SIGKILL, SIGSTOP})
      v.push_back({sig, When::kMidAllreduce, 0, shm});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Faults, FaultTest, ::testing::ValuesIn(AllFaults()),
                         [](const ::testing::TestParamInfo<Fault>& i) {
                           return Describe(i.param);
                         });

}  // namespace
}  // namespace horovod
