// PeerLiveness rules on a fake clock: heartbeats fall due after a tenth of
// the timeout, silence past the timeout names the link, and time spent in
// this rank's own collectives is not the peers' silence.
#include "runtime/peer_liveness.h"

#include <gtest/gtest.h>

namespace horovod {
namespace {

using Clock = PeerLiveness::Clock;
using std::chrono::milliseconds;

TEST(PeerLiveness, IntervalIsATenthOfTheTimeoutWithinBounds) {
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(3), 0.3);
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(300), 1.0);
  EXPECT_DOUBLE_EQ(PeerLiveness::IntervalFor(0.1), 0.05);
}

TEST(PeerLiveness, HeartbeatFallsDueAndSendingResetsIt) {
  const Clock::time_point t0{};
  PeerLiveness l(2, 3.0, t0);
  EXPECT_FALSE(l.HeartbeatDue(t0 + milliseconds(299)));
  EXPECT_EQ(l.WaitMs(t0 + milliseconds(200)), 101);
  EXPECT_TRUE(l.HeartbeatDue(t0 + milliseconds(300)));
  EXPECT_EQ(l.WaitMs(t0 + milliseconds(400)), 0);
  l.Sent(t0 + milliseconds(400));
  EXPECT_FALSE(l.HeartbeatDue(t0 + milliseconds(600)));
  EXPECT_TRUE(l.HeartbeatDue(t0 + milliseconds(700)));
  // Probing runs on its own schedule, whatever was sent.
  EXPECT_TRUE(l.ProbeDue(t0 + milliseconds(400)));
  l.Probed(t0 + milliseconds(400));
  EXPECT_FALSE(l.ProbeDue(t0 + milliseconds(699)));
  EXPECT_TRUE(l.ProbeDue(t0 + milliseconds(700)));
}

TEST(PeerLiveness, SilencePastTheTimeoutNamesTheQuietestLink) {
  const Clock::time_point t0{};
  PeerLiveness l(3, 3.0, t0);
  EXPECT_EQ(l.Silent(t0 + milliseconds(3000)), -1);
  l.Heard(0, t0 + milliseconds(2000));
  l.Heard(2, t0 + milliseconds(500));
  // Link 1 was never heard from, link 2 since 0.5 s, link 0 since 2 s.
  EXPECT_EQ(l.Silent(t0 + milliseconds(3001)), 1);
  l.Heard(1, t0 + milliseconds(3001));
  EXPECT_EQ(l.Silent(t0 + milliseconds(3400)), -1);
  EXPECT_NEAR(l.SilentFor(2, t0 + milliseconds(3400)), 2.9, 1e-9);
  EXPECT_EQ(l.Silent(t0 + milliseconds(3600)), 2);
  l.Heard(2, t0 + milliseconds(3600));
  EXPECT_EQ(l.Silent(t0 + milliseconds(4000)), -1);
  EXPECT_EQ(l.Silent(t0 + milliseconds(5001)), 0);
}

TEST(PeerLiveness, BusyTimeIsNotSilence) {
  const Clock::time_point t0{};
  PeerLiveness l(1, 3.0, t0);
  // A 10 s collective: the peer was in it too and could not send.
  l.Busy(milliseconds(10000), t0 + milliseconds(10500));
  EXPECT_EQ(l.Silent(t0 + milliseconds(10500)), -1);
  EXPECT_NEAR(l.SilentFor(0, t0 + milliseconds(10500)), 0.5, 1e-9);
  EXPECT_EQ(l.Silent(t0 + milliseconds(13600)), 0);
  // Never moved past now.
  PeerLiveness m(1, 3.0, t0);
  m.Heard(0, t0 + milliseconds(100));
  m.Busy(milliseconds(5000), t0 + milliseconds(200));
  EXPECT_NEAR(m.SilentFor(0, t0 + milliseconds(200)), 0.0, 1e-9);
}

}  // namespace
}  // namespace horovod
