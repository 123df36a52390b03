// Executor: carries out one Response on this rank: takes the matching
// entries from the TensorQueue, packs fused tensors into the persistent
// fusion buffer, runs the collective algorithm over the process set's
// members, unpacks, and completes the handles. Used only by the background
// loop. A non-OK return means the transport failed: the job cannot go on.
#ifndef HOROVOD_RUNTIME_EXECUTOR_H_
#define HOROVOD_RUNTIME_EXECUTOR_H_

#include <map>
#include <memory>
#include <string>

#include "collectives/communicator.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm_collectives.h"
#include "common/knobs.h"
#include "coordination/message.h"
#include "runtime/process_set_table.h"
#include "runtime/tensor_queue.h"
#include "timeline/timeline.h"
#include "transport/transport.h"

namespace horovod {

class Executor {
 public:
  // `shm`, if not null, holds this host's ranks; collectives whose members
  // are exactly those go through shared memory. `hosts[r]` is global rank
  // r's host key: allreduce over members on several hosts goes
  // hierarchically unless the knobs turn that off. `timeline` (owned by the
  // engine) receives each tensor's activities while it is active.
  Executor(Transport* transport, ShmGroup* shm, TensorQueue* queue,
           ProcessSetTable* sets, const Knobs& knobs, Timeline* timeline,
           std::vector<std::string> hosts);

  Status Execute(const Response& resp);
  // Every rank must switch at the same point of the response stream.
  void SetSmallAllreduceBytes(int64_t bytes);
  // Completes the entries whose transfer broke, once the engine knows the
  // root cause (which rank died) rather than just the broken link.
  void FailBroken(const Status& status);

 private:
  // How this rank runs one process set's collectives, built on its first
  // use and dropped when the set is added or removed again.
  struct Plan {
    std::unique_ptr<Communicator> all;    // every member
    std::unique_ptr<Communicator> local;  // hierarchical: members on our host
    std::unique_ptr<Communicator> cross;  // hierarchical, leaders: one a host
  };
  // Null when we are not a member of the set (or it is unknown).
  Plan* PlanFor(int process_set);
  Communicator MakeComm(const std::vector<int>& members);

  // Takes the response's entries, runs one of the two below, completes.
  Status Allreduce(const Response& r, Plan& plan);
  // Over shared memory: the tensors are reduced where they lie.
  Status AllreduceInPlace(const Response& r, Communicator& comm, ReduceOp op,
                          double post);
  // Through the fusion buffer (unless a single tensor): TCP, hierarchical.
  Status AllreduceBuffered(const Response& r, Plan& plan, ReduceOp op,
                           double post);
  Status Allgather(const Response& r, Communicator& comm);
  Status Broadcast(const Response& r, Communicator& comm);
  Status Alltoall(const Response& r, Communicator& comm);
  Status Reducescatter(const Response& r, Communicator& comm);
  void Finish(TensorEntry& e, const Status& s);
  // Moves every tensor of `r` to timeline activity `activity`.
  void Mark(const Response& r, const char* activity);
  // The activity of moving data for `r`: transport and op, e.g.
  // SHM_ALLREDUCE.
  void MarkTransfer(const Response& r, const Communicator& comm);
  void Done(TensorEntry& e, const Status& s);

  Transport* transport_;
  ShmGroup* shm_;
  TensorQueue* queue_;
  ProcessSetTable* sets_;
  Timeline* timeline_;
  std::vector<std::string> hosts_;
  bool hierarchical_allreduce_;
  AlgorithmConfig algo_;
  std::map<int, Plan> plans_;
  Scratch algo_scratch_;   // algorithm temporaries
  Scratch fusion_buffer_;  // packed tensors of a fused response
  std::vector<TensorEntry> broken_;
  // Reused by Allreduce for the entries of a response.
  std::vector<TensorEntry> entries_;
  std::vector<bool> present_;
  std::vector<Piece> pieces_;
};

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_EXECUTOR_H_
