// PeerLiveness: tells a hung peer from an idle one on the control links.
// Coordination traffic flows only when ranks submit tensors, so an idle link
// is silent and a stopped process (SIGSTOP, a blackholed connection) would
// look the same. Each side therefore sends an empty frame when it has sent
// nothing for a heartbeat interval, and a link that brings nothing for the
// operation timeout names a hung peer. Time this rank spent inside its own
// collectives does not count as the peers' silence: they were in the same
// collectives, and transfers have deadlines of their own.
//
// Times are passed in, so the rules are testable without sockets or sleeps.
// Thread-safety: used by the thread driving the engine's loop only.
#ifndef HOROVOD_RUNTIME_PEER_LIVENESS_H_
#define HOROVOD_RUNTIME_PEER_LIVENESS_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

namespace horovod {

class PeerLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // A tenth of the timeout, within [50 ms, 1 s]: several heartbeats fit in
  // any timeout, and an idle job costs one tiny frame a second per link.
  static double IntervalFor(double timeout_s) {
    return std::clamp(timeout_s / 10, 0.05, 1.0);
  }

  PeerLiveness(int links, double timeout_s, Clock::time_point now)
      : timeout_(ToDuration(timeout_s)),
        interval_(ToDuration(IntervalFor(timeout_s))),
        heard_(static_cast<size_t>(links), now),
        sent_(now),
        probed_(now) {}

  void Heard(int link, Clock::time_point now) {
    heard_[static_cast<size_t>(link)] = now;
  }
  void Sent(Clock::time_point now) { sent_ = now; }
  bool HeartbeatDue(Clock::time_point now) const {
    return now - sent_ >= interval_;
  }
  // Links are also looked at for a hang-up once an interval, busy or not.
  bool ProbeDue(Clock::time_point now) const {
    return now - probed_ >= interval_;
  }
  void Probed(Clock::time_point now) { probed_ = now; }
  // This rank was busy (not listening) for `busy`, ending now.
  void Busy(Clock::duration busy, Clock::time_point now) {
    for (auto& t : heard_) t = std::min(now, t + busy);
  }
  // The link silent longest beyond the timeout, or -1.
  int Silent(Clock::time_point now) const {
    int worst = -1;
    for (size_t i = 0; i < heard_.size(); ++i)
      if (now - heard_[i] > timeout_ &&
          (worst < 0 || heard_[i] < heard_[static_cast<size_t>(worst)]))
        worst = static_cast<int>(i);
    return worst;
  }
  double SilentFor(int link, Clock::time_point now) const {
    return std::chrono::duration<double>(now -
                                         heard_[static_cast<size_t>(link)])
        .count();
  }
  // How long the loop may sleep before a heartbeat or a check is due.
  int WaitMs(Clock::time_point now) const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    sent_ + interval_ - now)
                    .count();
    return static_cast<int>(std::max<int64_t>(0, left + 1));
  }

 private:
  static Clock::duration ToDuration(double s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(s));
  }

  Clock::duration timeout_;
  Clock::duration interval_;
  std::vector<Clock::time_point> heard_;
  Clock::time_point sent_;
  Clock::time_point probed_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_PEER_LIVENESS_H_
