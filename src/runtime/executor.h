// Executor: carries out one Response on this rank: takes the matching
// entries from the TensorQueue by name (allreduce claims them in place, or
// is handed entries the engine claimed by address), packs fused tensors into
// the persistent fusion buffer, runs the collective algorithm over the process
// set's members, unpacks, and completes the handles. Used by one thread at a
// time: whichever drives the engine's loop (the loop thread or a waiting
// caller, under the engine's drive mutex), except Abort. A non-OK return means
// the transport failed: the job cannot go on.
#ifndef HOROVOD_RUNTIME_EXECUTOR_H_
#define HOROVOD_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "collectives/collective_group.h"
#include "collectives/communicator.h"
#include "collectives/hierarchical_group.h"
#include "collectives/tcp_group.h"
#include "common/knobs.h"
#include "coordination/message.h"
#include "runtime/drive_counter.h"
#include "runtime/process_set_table.h"
#include "runtime/tensor_queue.h"
#include "timeline/timeline.h"
#include "transport/shm_group.h"
#include "transport/transport.h"

namespace horovod {

// Creates a shared-memory group over `members` (global ranks, ascending,
// ours included, all on our host), collectively with them; null without
// error when they cannot share memory (ShmGroup::Create).
using ShmGroupFactory = std::function<Status(const std::vector<int>& members,
                                             std::unique_ptr<ShmGroup>* out)>;

// Where an executor's time went since its stats were last taken
// (EngineMetrics).
struct ExecutorStats {
  int64_t copy_ns = 0;      // fusion-buffer copies
  int64_t transfer_ns = 0;  // everything else inside the collectives
};

// The work an executor has done since it was made (EngineMetrics).
struct ExecutorWork {
  uint64_t responses = 0;  // collectives that moved data
  uint64_t tensors = 0;
  uint64_t bytes = 0;
};

class Executor {
 public:
  // `shm`, if not null, holds this host's ranks; collectives whose members
  // are exactly those go through shared memory. Other member lists on our
  // host (process sets, a host's part of a hierarchical allreduce) get a
  // group of their own from `make_shm` on first use, if it is set.
  // `hosts[r]` is global rank r's host key: allreduce over members on
  // several hosts goes hierarchically unless the knobs turn that off.
  // `timeline` (owned by the engine) receives each tensor's activities
  // while it is active.
  Executor(Transport* transport, ShmGroup* shm, ShmGroupFactory make_shm,
           TensorQueue* queue, ProcessSetTable* sets, const Knobs& knobs,
           Timeline* timeline, std::vector<std::string> hosts);

  Status Execute(const Response& resp);
  // Runs allreduce `r` over entries the caller took from the queue itself
  // (by address, not by name): entries[i] is tensor i's (null: this rank
  // has none, it contributes zeros). Completes their handles. `r`'s
  // tensors are its shapes; its names may be left empty (they are read
  // only for the timeline). `counts`, when given, holds each tensor's
  // number of elements (its shape's product), which spares reading them.
  Status AllreduceEntries(const Response& r, TensorEntry* const* entries,
                          const int64_t* counts = nullptr);
  // Completes allreduce `r` (one tensor of process set 0, entry `e`; null:
  // none here) without a collective: copies[m] holds member m's operand,
  // already prescaled. They are reduced in member order, so every member
  // gets the same bits.
  void ReduceCopies(const Response& r, TensorEntry* e,
                    const char* const* copies, int members);
  // An entry whose collective will not run because the job failed: it is
  // completed by FailBroken, with the root cause.
  void Abandon(TensorEntry* e) { broken_.push_back(std::move(*e)); }
  // Every rank must switch at the same point of the response stream.
  void SetSmallAllreduceBytes(int64_t bytes);
  // Completes the entries whose transfer broke, once the engine knows the
  // root cause (which rank died) rather than just the broken link.
  void FailBroken(const Status& status);
  // Wakes and fails every wait in the groups it made (any thread).
  void Abort(const std::string& reason);
  // Returns the stats gathered since the last call and starts anew.
  ExecutorStats TakeStats();
  // Readable from any thread. A tensor is counted before its handle
  // completes, so a thread that saw the handle complete sees it counted.
  ExecutorWork Work() const;

 private:
  // How this rank runs one process set's collectives, built on its first
  // use and dropped when the set is added or removed again.
  struct Plan {
    std::unique_ptr<CollectiveGroup> group;  // every collective but Adasum
    std::unique_ptr<TcpGroup> p2p;           // Adasum: pairs over the transport
  };
  // *plan is null when we are not a member of the set (or it is unknown).
  // Fails only when creating a shared-memory group does.
  Status PlanFor(int process_set, Plan** plan);
  // The one place that decides how `members` move data: shared memory when
  // they share a host (and may), else the transport.
  Status MakeGroup(const std::vector<int>& members,
                   std::unique_ptr<CollectiveGroup>* group);
  // The shared-memory group over `members`, if they can have one.
  Status ShmFor(const std::vector<int>& members, ShmGroup** group);

  // Takes the response's entries, reduces them, completes them.
  Status Allreduce(const Response& r, Plan& plan);
  Status Allreduce(const Response& r, Plan& plan, TensorEntry* const* entries,
                   const int64_t* counts = nullptr);
  Status Allgather(const Response& r, CollectiveGroup& g);
  Status Broadcast(const Response& r, CollectiveGroup& g);
  Status Alltoall(const Response& r, CollectiveGroup& g);
  Status Reducescatter(const Response& r, CollectiveGroup& g);
  // Completes an entry's handle (its state, where the entry is no longer
  // at hand).
  void Finish(TensorEntry& e, const Status& s);
  void Finish(HandleState& state, const Status& s);
  // Counts one collective's tensor and its bytes.
  void Count(const TensorEntry& e);
  void Count(uint64_t tensors, int64_t bytes);
  // A collective's time, split by its phases as they start (a PhaseFn):
  // fusion-buffer copies count as copying, the rest as transfer. Phase
  // also moves the response's tensors to the phase's timeline activity.
  void BeginPhases();
  void Phase(const Response& r, const char* prefix, const char* name);
  void EndPhases();
  // Moves every tensor of `r` to timeline activity `activity`.
  void Mark(const Response& r, const char* activity);
  // The activity of moving data for `r`: transport and op, e.g.
  // SHM_ALLREDUCE.
  void MarkTransfer(const Response& r, const CollectiveGroup& g);
  void Done(TensorEntry& e, const Status& s);

  Transport* transport_;
  ShmGroup* shm_;
  ShmGroupFactory make_shm_;
  // Groups made by make_shm_, by member list. They outlive the plans (which
  // the autotuner rebuilds) because making one is a collective with
  // pre-faulted segments.
  std::map<std::vector<int>, std::unique_ptr<ShmGroup>> groups_;
  std::mutex groups_mu_;  // changes to groups_ vs Abort from other threads
  TensorQueue* queue_;
  ProcessSetTable* sets_;
  Timeline* timeline_;
  std::vector<std::string> hosts_;
  Hierarchy hierarchy_;
  AlgorithmConfig algo_;
  std::map<int, Plan> plans_;
  Scratch algo_scratch_;   // algorithm temporaries
  Scratch fusion_buffer_;  // packed tensors of a fused response
  Scratch zeros_;          // a joined rank's stand-ins for missing tensors
  std::vector<TensorEntry> broken_;
  // Reused by Allreduce for the records of a response it claims, and
  // their entries (null where this rank has none).
  std::vector<QueuedTensor*> records_;
  std::vector<TensorEntry*> claimed_;
  std::vector<Piece> pieces_;
  std::vector<HandleState*> states_;  // pieces_' completion states
  // Elements per tensor, where the caller gives none (and as Adasum's
  // vector).
  std::vector<int64_t> counts_;
  ExecutorStats stats_;
  DriveCounter<uint64_t> responses_;
  DriveCounter<uint64_t> tensors_;
  DriveCounter<uint64_t> bytes_;
  std::chrono::steady_clock::time_point phase_start_;
  bool phase_copies_ = false;  // the current phase is a fusion-buffer copy
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_EXECUTOR_H_
