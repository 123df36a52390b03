// Coordinator: rank 0's negotiation state. It collects every rank's request
// lists, decides which tensors are ready on every member of their process
// set, checks that the members agree (shape, dtype, op, root, scales,
// device), fuses ready allreduces, handles join, barrier, process-set
// changes and shutdown, and watches for stalls. It also fails, at once and
// on every rank, operations that can never complete because the ranks they
// wait for are blocked in other operations (a deadlock: rank 0 in a
// barrier while rank 1 waits in an allgather).
//
// Pure: no sockets and no threads. Time comes in as an argument, so tests
// drive it with a fake clock. Used by one thread.
#ifndef HOROVOD_COORDINATION_COORDINATOR_H_
#define HOROVOD_COORDINATION_COORDINATOR_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "coordination/message.h"
#include "coordination/response_cache.h"
#include "coordination/response_fill.h"
#include "coordination/slot_lane.h"

namespace horovod {

struct CoordinatorConfig {
  int size = 1;
  int64_t fusion_threshold = 128ll * 1024 * 1024;
  double cycle_time_s = 0.001;
  double stall_check_s = 60;
  bool stall_check = true;
  double stall_shutdown_s = 600;
  // How long ranks must stay deadlocked before their operations fail.
  double deadlock_grace_s = 0.5;
};

class Coordinator {
 public:
  // `cache` (may be null) resolves cache hits; it is owned by the engine.
  Coordinator(const CoordinatorConfig& config, const ResponseCache* cache);

  void AddRequestList(int rank, const RequestList& list, Clock::time_point now);
  // True when a response list should go out now.
  bool ShouldEmit(Clock::time_point now) const;
  // When ShouldEmit may next turn true without new input (cycle time, stall
  // deadlines); Clock::time_point::max() when never.
  Clock::time_point NextWake(Clock::time_point now) const;
  ResponseList TakeResponses(Clock::time_point now);
  // The same into `list`, whose responses are refilled in place
  // (ResponseFill): a caller that keeps its list from step to step
  // allocates nothing for a step that agrees what the last one did.
  void TakeResponses(Clock::time_point now, ResponseList* list);
  // Warnings about tensors that some ranks have not submitted, once each.
  std::vector<std::string> TakeStallWarnings(Clock::time_point now);

  // The autotuner's choice; takes effect from the next decision.
  void SetTuning(int64_t fusion_threshold, double cycle_time_s) {
    config_.fusion_threshold = fusion_threshold;
    config_.cycle_time_s = cycle_time_s;
  }

  const std::vector<int>* Members(int process_set) const;
  size_t pending() const { return table_.size() + lane_.open().size(); }
  // Keys of the operations found deadlocked (sorted), failed by the first
  // TakeResponses deadlock_grace_s after they were found (for tests).
  const std::vector<std::string>& deadlocked() const { return deadlocked_; }

 private:
  struct Pending {
    std::vector<Request> requests;  // by rank; valid where have[rank]
    std::vector<bool> have;
    Clock::time_point first_seen;
    Clock::time_point complete_at;
    bool complete = false;
    bool warned = false;
    bool stalled = false;  // failed by the stall shutdown
    uint64_t order = 0;
    int lane_slot = -1;  // the cache slot it blocks in lane_, if any
  };
  static const Request& First(const Pending& p);
  static std::string RankList(const std::vector<int>& ranks);

  // `slot`: the cache slot the request was named by, or -1 (looked up).
  void AddRequest(Request r, Clock::time_point now, int slot = -1);
  // The table entry for `key`; one made now (*made) starts with
  // `first_seen`, `order`, and `slot` (>= 0) blocked in the lane.
  Pending& EntryFor(const std::string& key, Clock::time_point first_seen,
                    uint64_t order, int slot, bool* made);
  void Erase(std::map<std::string, Pending>::iterator it);

  // The lane (coordinator_lane.cc). A hit enters it when nothing needs the
  // request behind it: a cached allreduce, broadcast or reducescatter of
  // the global set, not grouped, while no rank has joined or reports a
  // blocked wait and no table entry stands for the slot's tensor. A slot
  // moves to the table (its requests rebuilt from the cache) before
  // anything would need them: a full request for its tensor, a join, a
  // reported wait, a stall, or a response list that would change the cache
  // while it is open.
  bool TryLane(uint32_t slot, int rank, Clock::time_point now);
  void MoveToTable(uint32_t slot);
  void MoveAllToTable();
  void MoveOlderThan(Clock::time_point now, double seconds);
  struct LaneReadiness {
    bool incomplete = false, complete = false, stalled = false;
    int64_t ready_bytes = 0;
    Clock::time_point oldest = Clock::time_point::max();
  };
  LaneReadiness LaneState(Clock::time_point now) const;
  static Clock::time_point After(Clock::time_point t, double s);
  // When pending work (table entry or open slot) next needs a decision
  // without new input: its cycle once complete, else its stall deadlines.
  Clock::time_point WakeFor(bool complete, bool warned,
                            Clock::time_point first_seen,
                            Clock::time_point complete_at) const;
  void RefreshCompleteness(Clock::time_point now);
  // Member m has submitted p, or stands in for it having joined.
  bool Present(const Pending& p, int m) const;
  bool IsComplete(const Pending& p) const;
  std::vector<int> Missing(const Pending& p) const;
  Response Validate(const Pending& p);

  // What rank `r` waiting on `key` waits for: the members that have not
  // submitted it; false when the wait can still end without new
  // submissions (unknown or decided operation, or one `r` never submitted:
  // a report older than its end).
  bool WaitsFor(int r, const std::string& key, std::vector<int>* missing) const;
  void FindDeadlock(Clock::time_point now);
  bool DeadlockDue(Clock::time_point now) const;
  std::string DescribeWait(int r) const;
  void FailDeadlocked(std::vector<Response>* errors);

  using Table = std::map<std::string, Pending>;
  CoordinatorConfig config_;
  const ResponseCache* cache_;
  Table table_;
  uint64_t next_order_ = 0;
  std::map<int, std::vector<int>> process_sets_;
  int next_process_set_ = 1;
  SlotLane lane_;
  // TakeResponses' work, kept from list to list.
  struct Ready {
    uint64_t order;
    Table::iterator it;
    int slot;  // >= 0: a complete slot of the lane
  };
  std::vector<Ready> ready_;
  ResponseFill fill_;
  std::vector<bool> joined_;
  bool any_joined_ = false;
  int waiting_ranks_ = 0;  // ranks whose waiting_ is not empty
  int last_joined_ = -1;
  bool join_ready_ = false;
  std::set<int> shutdown_ranks_;
  std::vector<std::pair<int32_t, uint32_t>> stale_;
  std::vector<std::vector<std::string>> waiting_;  // per rank: blocked on
  std::vector<std::string> deadlocked_;
  Clock::time_point deadlock_since_;
  std::string deadlock_message_;
};

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_COORDINATOR_H_
