// DriveGate and Handle::Wait: a waiter runs the engine's drive function on
// its own thread; timeouts hold while it drives; every wait is reported to
// the engine from its start to its end; a closed gate is never entered
// again and Close waits for drivers still inside.
#include "runtime/drive_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/handle_state.h"

namespace horovod {
namespace {

using SteadyClock = std::chrono::steady_clock;

TEST(DriveGate, WaiterDrivesOnItsOwnThread) {
  std::thread::id driver;
  auto gate = std::make_shared<DriveGate>(
      [&](HandleState& h, DriveGate::TimePoint) {
        driver = std::this_thread::get_id();
        h.Complete(Status::Mismatch("from the driver"));
      },
      nullptr);
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  Status st = Handle(state.Share()).Wait();
  EXPECT_EQ(driver, std::this_thread::get_id());
  EXPECT_EQ(st.code(), StatusCode::kMismatch);
  EXPECT_EQ(st.message(), "from the driver");
}

TEST(DriveGate, DoneHandleIsNotDriven) {
  int drives = 0;
  auto gate = std::make_shared<DriveGate>(
      [&](HandleState&, DriveGate::TimePoint) { ++drives; }, nullptr);
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  state->Complete(Status::OK());
  EXPECT_TRUE(Handle(state.Share()).Wait().ok());
  EXPECT_EQ(drives, 0);
}

TEST(DriveGate, TimeoutHoldsWhileDriving) {
  // A driver that never completes the handle but honours `until`, as the
  // engine's does.
  auto gate = std::make_shared<DriveGate>(
      [](HandleState&, DriveGate::TimePoint until) {
        std::this_thread::sleep_until(until);
      },
      nullptr);
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  auto t0 = SteadyClock::now();
  Status st = Handle(state.Share()).Wait(0.05);
  double waited =
      std::chrono::duration<double>(SteadyClock::now() - t0).count();
  EXPECT_EQ(st.code(), StatusCode::kTimeout);
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);
}

TEST(DriveGate, ClosedGateFallsBackToWaiting) {
  std::atomic<int> drives{0};
  auto gate = std::make_shared<DriveGate>(
      [&](HandleState&, DriveGate::TimePoint) { ++drives; }, nullptr);
  gate->Close();
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  std::thread completer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    state->Complete(Status::OK());
  });
  EXPECT_TRUE(Handle(state.Share()).Wait(10).ok());
  completer.join();
  EXPECT_EQ(drives.load(), 0);
  EXPECT_FALSE(gate->Drive(*state, SteadyClock::now()));
}

TEST(DriveGate, CloseWaitsForDriversInside) {
  std::atomic<bool> inside{false}, release{false}, closed{false};
  auto gate = std::make_shared<DriveGate>(
      [&](HandleState& h, DriveGate::TimePoint) {
        inside = true;
        while (!release) std::this_thread::yield();
        h.Complete(Status::OK());
      },
      nullptr);
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  std::thread waiter([&] { EXPECT_TRUE(Handle(state.Share()).Wait(10).ok()); });
  while (!inside) std::this_thread::yield();
  std::thread closer([&] {
    gate->Close();
    closed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(closed.load());
  release = true;
  closer.join();
  waiter.join();
  EXPECT_TRUE(closed.load());
}

TEST(DriveGate, AWaitCountsItsDriveAndTheDriveReportsIt) {
  // A wait without a timeout hands the drive no deadline, and counts the
  // drive's time as waiting. A wait the drive finished is the drive's to
  // report (the engine's notices long ones): the gate reports nothing.
  DriveGate::TimePoint seen_until;
  std::vector<DriveGate::TimePoint> reported;
  DriveGate::TimePoint drive_begin, drive_end;
  auto gate = std::make_shared<DriveGate>(
      [&](HandleState& h, DriveGate::TimePoint until) {
        seen_until = until;
        drive_begin = SteadyClock::now();
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        h.Complete(Status::OK());
        drive_end = SteadyClock::now();
      },
      [&](const HandleState&, bool, DriveGate::TimePoint now) {
        reported.push_back(now);
      });
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  const auto before = SteadyClock::now();
  EXPECT_TRUE(Handle(state.Share()).Wait().ok());
  const auto after = SteadyClock::now();
  EXPECT_EQ(seen_until, DriveGate::TimePoint::max());
  EXPECT_TRUE(reported.empty());
  // The wait's time lies between the drive's and the whole call's.
  EXPECT_GE(gate->wait_time(), (drive_end - drive_begin) * 99 / 100);
  EXPECT_LE(gate->wait_time(), (after - before) * 101 / 100);
  gate->Close();
}

TEST(DriveGate, WaitsAreReportedFromStartToEnd) {
  // No drive function: waiters sleep, and still report what they wait on,
  // also when the wait times out.
  std::vector<std::pair<const HandleState*, bool>> events;
  auto gate = std::make_shared<DriveGate>(
      DriveGate::DriveFn(),
      [&](const HandleState& h, bool begin, DriveGate::TimePoint) {
        events.emplace_back(&h, begin);
      });
  HandleRef state = HandleRef::Make();
  state->gate = gate;
  EXPECT_EQ(Handle(state.Share()).Wait(0.01).code(), StatusCode::kTimeout);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0],
            std::make_pair(static_cast<const HandleState*>(state.get()), true));
  EXPECT_EQ(
      events[1],
      std::make_pair(static_cast<const HandleState*>(state.get()), false));
  EXPECT_FALSE(gate->Drive(*state, SteadyClock::now()));
  state->Complete(Status::OK());
  EXPECT_TRUE(Handle(state.Share()).Wait().ok());  // done: nothing to report
  EXPECT_EQ(events.size(), 2u);
  gate->Close();
}

}  // namespace
}  // namespace horovod
