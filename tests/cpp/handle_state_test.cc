// HandleState's completion: the first Complete wins and a later one
// changes nothing, whoever reads it finished reads what the winner wrote,
// and every thread asleep on it wakes, in whatever order sleeps and the
// completion come.
#include "runtime/handle_state.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace horovod {
namespace {

TEST(HandleState, TheFirstCompletionWins) {
  HandleRef state = HandleRef::Make();
  EXPECT_FALSE(state->Done());
  state->Complete(Status::Mismatch("first"));
  state->Complete(Status::OK());
  state->Complete(Status::Aborted("third"));
  ASSERT_TRUE(state->Done());
  EXPECT_EQ(state->status.message(), "first");

  state->Reset(DataType::kFloat32);  // for the name's next submission
  EXPECT_FALSE(state->Done());
  EXPECT_TRUE(state->status.ok());
  state->Complete(Status::OK());
  state->Complete(Status::Mismatch("late"));
  ASSERT_TRUE(state->Done());
  EXPECT_TRUE(state->status.ok());
}

// An operation's outputs last until the state is renewed, and none of
// them is left for the next submission, which may have no outputs.
TEST(HandleState, ResetClearsTheOutputsOfTheLastOperation) {
  HandleRef state = HandleRef::Make();
  state->SetOutput(std::make_shared<Buffer>(16));
  state->output_shape = {4};
  state->received_splits = {2, 2};
  state->Complete(Status::OK());
  ASSERT_NE(state->output, nullptr);

  state->Reset(DataType::kFloat32);
  EXPECT_EQ(state->output, nullptr);
  EXPECT_TRUE(state->output_shape.empty());
  EXPECT_TRUE(state->received_splits.empty());
  state->Complete(Status::OK());  // an in-place operation: nothing to clear
  state->Reset(DataType::kFloat32);
  EXPECT_EQ(state->output, nullptr);
  EXPECT_TRUE(state->output_shape.empty());
}

// A failure and a success race: a reader that sees the state finished
// sees the status of the one that won, never a half-written one.
TEST(HandleState, ARacingFailureIsSeenWholeOrNotAtAll) {
  for (int round = 0; round < 200; ++round) {
    HandleRef state = HandleRef::Make();
    std::atomic<bool> go{false};
    auto complete = [&](const Status& st) {
      while (!go.load()) std::this_thread::yield();
      state->Complete(st);
    };
    std::thread fail(complete, Status::Mismatch("the failure"));
    std::thread succeed(complete, Status::OK());
    go.store(true);
    while (!state->Done()) std::this_thread::yield();
    const Status seen = state->status;
    fail.join();
    succeed.join();
    EXPECT_TRUE(seen.ok() || seen.message() == "the failure");
    EXPECT_EQ(state->status.ok(), seen.ok());
  }
}

// Threads that sleep before, during and after the completion all return
// finished, woken: none waits out its deadline.
TEST(HandleState, EverySleeperWakes) {
  for (int round = 0; round < 50; ++round) {
    HandleRef state = HandleRef::Make();
    std::atomic<int> woken{0};
    std::vector<std::thread> sleepers;
    for (int i = 0; i < 4; ++i)
      sleepers.emplace_back([&] {
        const auto t0 = std::chrono::steady_clock::now();
        const bool done = state->Sleep(t0 + std::chrono::seconds(4));
        if (done &&
            std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2))
          woken.fetch_add(1);
      });
    if (round % 2 == 0) std::this_thread::yield();
    state->Complete(round % 3 == 0 ? Status::Aborted("gone") : Status::OK());
    for (std::thread& t : sleepers) t.join();
    EXPECT_EQ(woken.load(), 4);
  }
}

TEST(HandleState, ASleepThatTimesOutSaysSo) {
  HandleRef state = HandleRef::Make();
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(state->Sleep(t0 + std::chrono::milliseconds(20)));
  EXPECT_GE(std::chrono::steady_clock::now() - t0,
            std::chrono::milliseconds(20));
  state->Complete(Status::OK());  // no sleeper left to wake
  EXPECT_TRUE(state->Sleep(t0));
}

}  // namespace
}  // namespace horovod
