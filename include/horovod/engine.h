// Engine: the public entry point of the C++ API. One Engine is one process's
// membership in a job: it owns the transport, the background loop and every
// in-flight collective. Create it with Engine::Start; destroying it shuts down.
//
// Thread-safety: every method may be called from any thread concurrently.
// Collectives are asynchronous: they return a Handle at once and complete on
// the background thread. Memory handed to a collective must stay valid and
// untouched until its Handle completes.
#ifndef HOROVOD_ENGINE_H_
#define HOROVOD_ENGINE_H_

#include <horovod/engine_metrics.h>
#include <horovod/job_info.h>
#include <horovod/knobs.h>
#include <horovod/status.h>
#include <horovod/types.h>

#include <memory>
#include <string>
#include <vector>

namespace horovod {

// Output of a collective whose result size is known only after negotiation
// (allgather, alltoall, reducescatter), or a result buffer an adapter asked
// for (Engine::ResultBuffer). 64-byte aligned, owned by the Handle and by
// anyone holding the shared_ptr.
class Buffer {
 public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

struct HandleState;

// A collective in flight. Copyable; all copies refer to the same operation.
class Handle {
 public:
  Handle() = default;
  // Adopts a reference to `state` counted for it (the state counts its
  // references itself: the engine reuses a state once no handle refers to
  // it).
  explicit Handle(HandleState* state) : state_(state) {}
  Handle(const Handle& o);
  Handle(Handle&& o) noexcept;
  Handle& operator=(Handle o) noexcept;
  ~Handle();

  bool valid() const { return state_ != nullptr; }
  // True once the operation finished (successfully or not).
  bool Poll() const;
  // Blocks until done or until timeout_s passes (negative: no limit other
  // than the engine's own deadlines, which always end a failed operation).
  Status Wait(double timeout_s = -1) const;
  // Valid after completion.
  const Status& status() const;
  // Result of allgather/alltoall/reducescatter; null for in-place ops.
  std::shared_ptr<Buffer> output() const;
  const std::vector<int64_t>& output_shape() const;
  // Alltoall: how many dim-0 rows came from each rank.
  const std::vector<int64_t>& received_splits() const;
  // The integer an operation answers with: join, the last rank to join;
  // add_process_set, the new set's id. -1 for the others.
  int int_result() const;
  // The element type of the enqueued tensor and of the output.
  DataType dtype() const;

 private:
  // Renews the state under a handle its caller kept for the name's next
  // submission, without letting go of it and taking it again.
  friend class TensorQueue;
  HandleState* state_ = nullptr;
};

struct CollectiveArgs {
  std::string name;  // unique among this rank's in-flight ops; "" = automatic
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = 0;                 // broadcast root, as a global rank
  std::vector<int64_t> splits;  // alltoall: rows sent to each member
  int process_set = 0;          // 0: the global set
};

class EngineImpl;

class Engine {
 public:
  // Joins the job described by `job` (rendezvous, authenticated mesh) and
  // starts the background loop, tuned by `knobs` (by default, as the
  // environment's HOROVOD_* variables say).
  static Status Start(const JobInfo& job, std::unique_ptr<Engine>* out);
  static Status Start(const JobInfo& job, const Knobs& knobs,
                      std::unique_ptr<Engine>* out);
  ~Engine();

  int rank() const;
  int size() const;
  int local_rank() const;
  int local_size() const;
  int cross_rank() const;
  int cross_size() const;
  bool is_homogeneous() const;

  // In place: `tensor` receives the reduction.
  Status Allreduce(const TensorView& tensor, const CollectiveArgs& args,
                   Handle* handle);
  // Tensors negotiated and executed as one unit.
  Status GroupedAllreduce(const std::vector<TensorView>& tensors,
                          const CollectiveArgs& args,
                          std::vector<Handle>* handles);
  // Concatenates every member's tensor along dim 0 (dim 0 may differ).
  Status Allgather(const TensorView& tensor, const CollectiveArgs& args,
                   Handle* handle);
  Status GroupedAllgather(const std::vector<TensorView>& tensors,
                          const CollectiveArgs& args,
                          std::vector<Handle>* handles);
  // In place: every member receives root's tensor.
  Status Broadcast(const TensorView& tensor, const CollectiveArgs& args,
                   Handle* handle);
  Status GroupedBroadcast(const std::vector<TensorView>& tensors,
                          const CollectiveArgs& args,
                          std::vector<Handle>* handles);
  // Sends args.splits[i] rows to member i (even split when empty).
  Status Alltoall(const TensorView& tensor, const CollectiveArgs& args,
                  Handle* handle);
  // Reduces, then leaves member i with its share of dim 0.
  Status Reducescatter(const TensorView& tensor, const CollectiveArgs& args,
                       Handle* handle);
  Status GroupedReducescatter(const std::vector<TensorView>& tensors,
                              const CollectiveArgs& args,
                              std::vector<Handle>* handles);
  // Any of the collectives above by its OpType, for callers that dispatch
  // on a value (language bindings): a group when several tensors (alltoall
  // takes exactly one). Barrier and join are refused; call them directly.
  Status Enqueue(OpType op, const std::vector<TensorView>& tensors,
                 const CollectiveArgs& args, std::vector<Handle>* handles);
  // The same for one tensor (not a group).
  Status Enqueue(OpType op, const TensorView& tensor,
                 const CollectiveArgs& args, Handle* handle);
  // For a caller that found its input for `op` (n tensors, named and on
  // the set as `args` say) unfit before enqueueing it, as Enqueue does
  // itself for what it checks: tells the set's other members, whose calls
  // of the operation then fail with `why` instead of waiting for this
  // rank, and returns `why` once they have (bounded by the engine's
  // deadlines), so every member goes on from the same point.
  Status Refuse(OpType op, size_t n, const CollectiveArgs& args,
                const Status& why);
  // Blocking collectives.
  Status Barrier(int process_set = 0);
  // Marks this rank as out of data; returns the last rank to join.
  Status Join(int* last_joined_rank);

  // A rank counts as blocked (for the deadlock check) while every thread
  // that has submitted to it waits. A thread whose operations have all
  // finished and that submits only synchronously (a framework's worker
  // thread running one collective for another thread) calls this to stop
  // counting until it submits again.
  void LeaveCensus();

  // Process sets: every rank must call these in the same order. The ranks
  // are 64-bit so that a caller's out-of-range value (Python's ints are
  // unbounded) is refused by value instead of wrapping onto a real rank.
  Status AddProcessSet(const std::vector<int64_t>& ranks, int* id);
  Status RemoveProcessSet(int id);
  Status ProcessSetRanks(int id, std::vector<int>* ranks) const;
  std::vector<int> ProcessSetIds() const;

  // Timeline (a Chrome trace of every tensor's negotiation and execution):
  // recorded by rank 0 only, so on other ranks these do nothing. Starting
  // again finishes the previous file. HOROVOD_TIMELINE starts one at init.
  Status StartTimeline(const std::string& path, bool mark_cycles = false);
  void StopTimeline();

  // Where this rank's engine time went so far (see engine_metrics.h).
  EngineMetrics Metrics() const;

  // A buffer for a result that a framework adapter hands over to its
  // framework (TensorFlow's out-of-place allreduce results): with
  // HOROVOD_KEEP_FREED_MEMORY (the default), kept when its last holder lets
  // go and handed out again for a result of the same size, so a result is
  // not faulted in afresh every call. Outlives the engine if still held.
  // Throws std::bad_alloc when there is no memory for it.
  std::shared_ptr<Buffer> ResultBuffer(size_t bytes);

  // Collective: waits (bounded) for every rank, then stops the loop. Pending
  // operations fail. Called by the destructor when not called explicitly.
  Status Shutdown();

 private:
  explicit Engine(std::unique_ptr<EngineImpl> impl);
  // The error for an `op` Enqueue does not start, naming it.
  Status NotStartable(OpType op) const;
  std::unique_ptr<EngineImpl> impl_;
};

}  // namespace horovod

#endif  // HOROVOD_ENGINE_H_
