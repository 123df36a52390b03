// Engine: the public facade over EngineImpl (runtime/engine_impl.h).
#include "horovod/engine.h"

#include "runtime/engine_impl.h"

namespace horovod {

// --- public API ------------------------------------------------------------

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { impl_->Shutdown(); }

Status Engine::Start(const JobInfo& job, std::unique_ptr<Engine>* out) {
  return Start(job, Knobs::FromEnvironment(), out);
}

Status Engine::Start(const JobInfo& job, const Knobs& knobs,
                     std::unique_ptr<Engine>* out) {
  auto impl = std::make_unique<EngineImpl>(job, knobs);
  HVD_RETURN_IF_ERROR(impl->Start());
  out->reset(new Engine(std::move(impl)));
  return Status::OK();
}

int Engine::rank() const { return impl_->job().rank; }
int Engine::size() const { return impl_->job().size; }
int Engine::local_rank() const { return impl_->job().local_rank; }
int Engine::local_size() const { return impl_->job().local_size; }
int Engine::cross_rank() const { return impl_->job().cross_rank; }
int Engine::cross_size() const { return impl_->job().cross_size; }
bool Engine::is_homogeneous() const { return impl_->job().homogeneous; }

namespace {
Status Many(EngineImpl& impl, OpType op, const std::vector<TensorView>& ts,
            const CollectiveArgs& a, std::vector<Handle>* hs) {
  hs->resize(ts.size());
  Status st = impl.Enqueue(op, ts.data(), ts.size(), a, hs->data());
  if (!st.ok()) hs->clear();
  return st;
}

// The collectives Enqueue starts; the others have calls of their own.
bool Startable(OpType op) {
  switch (op) {
    case OpType::kAllreduce:
    case OpType::kAllgather:
    case OpType::kBroadcast:
    case OpType::kAlltoall:
    case OpType::kReducescatter:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status Engine::Allreduce(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  return impl_->Enqueue(OpType::kAllreduce, &t, 1, a, h);
}
Status Engine::GroupedAllreduce(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return Many(*impl_, OpType::kAllreduce, ts, a, hs);
}
Status Engine::Allgather(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  return impl_->Enqueue(OpType::kAllgather, &t, 1, a, h);
}
Status Engine::GroupedAllgather(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return Many(*impl_, OpType::kAllgather, ts, a, hs);
}
Status Engine::Broadcast(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  return impl_->Enqueue(OpType::kBroadcast, &t, 1, a, h);
}
void Engine::LeaveCensus() { impl_->LeaveCensus(); }
Status Engine::GroupedBroadcast(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return Many(*impl_, OpType::kBroadcast, ts, a, hs);
}
Status Engine::Alltoall(const TensorView& t, const CollectiveArgs& a,
                        Handle* h) {
  return impl_->Enqueue(OpType::kAlltoall, &t, 1, a, h);
}
Status Engine::Reducescatter(const TensorView& t, const CollectiveArgs& a,
                             Handle* h) {
  return impl_->Enqueue(OpType::kReducescatter, &t, 1, a, h);
}
Status Engine::GroupedReducescatter(const std::vector<TensorView>& ts,
                                    const CollectiveArgs& a,
                                    std::vector<Handle>* hs) {
  return Many(*impl_, OpType::kReducescatter, ts, a, hs);
}
Status Engine::Enqueue(OpType op, const std::vector<TensorView>& ts,
                       const CollectiveArgs& a, std::vector<Handle>* hs) {
  if (!Startable(op)) return NotStartable(op);
  if (op == OpType::kAlltoall && ts.size() != 1)
    return Status::InvalidArgument("alltoall takes one tensor, got " +
                                   std::to_string(ts.size()) + " (rank " +
                                   std::to_string(rank()) + ")");
  return Many(*impl_, op, ts, a, hs);
}

Status Engine::Enqueue(OpType op, const TensorView& t, const CollectiveArgs& a,
                       Handle* h) {
  if (!Startable(op)) return NotStartable(op);
  return impl_->Enqueue(op, &t, 1, a, h);
}

Status Engine::Refuse(OpType op, size_t n, const CollectiveArgs& a,
                      const Status& why) {
  if (!Startable(op)) return why;
  return impl_->Refuse(op, n, a, why);
}

Status Engine::NotStartable(OpType op) const {
  return Status::InvalidArgument(std::string("Engine::Enqueue cannot start ") +
                                 OpTypeName(op) + "; call it directly (rank " +
                                 std::to_string(rank()) + ")");
}

Status Engine::Barrier(int process_set) {
  Request r;
  r.op = Op::kBarrier;
  r.name = "__barrier__";
  r.process_set = process_set;
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(std::move(r), &h));
  return h.Wait();
}

Status Engine::Join(int* last_joined_rank) {
  Request r;
  r.op = Op::kJoin;
  r.name = kJoinTensorName;
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(std::move(r), &h));
  HVD_RETURN_IF_ERROR(h.Wait());
  *last_joined_rank = h.int_result();
  return Status::OK();
}

Status Engine::AddProcessSet(const std::vector<int64_t>& ranks, int* id) {
  std::vector<int64_t> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() ||
      std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
      sorted.front() < 0 || sorted.back() >= size())
    return Status::InvalidArgument("invalid process set ranks " +
                                   ShapeString(ranks) + " for a job of size " +
                                   std::to_string(size()) +
                                   ": each must be a "
                                   "distinct rank of the job (rank " +
                                   std::to_string(rank()) + ")");
  Request r;
  r.op = Op::kAddProcessSet;
  r.name = "__add_process_set__";
  r.set_ranks.assign(sorted.begin(), sorted.end());
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(std::move(r), &h));
  HVD_RETURN_IF_ERROR(h.Wait());
  *id = h.int_result();
  return Status::OK();
}

Status Engine::RemoveProcessSet(int id) {
  Request r;
  r.op = Op::kRemoveProcessSet;
  r.name = "__remove_process_set__";
  r.set_id = id;
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(std::move(r), &h));
  return h.Wait();
}

Status Engine::ProcessSetRanks(int id, std::vector<int>* ranks) const {
  if (!impl_->sets().Get(id, ranks))
    return Status::InvalidArgument("process set " + std::to_string(id) +
                                   " is not registered");
  return Status::OK();
}

std::vector<int> Engine::ProcessSetIds() const { return impl_->sets().Ids(); }

Status Engine::StartTimeline(const std::string& path, bool mark_cycles) {
  return impl_->StartTimeline(path, mark_cycles);
}

void Engine::StopTimeline() { impl_->StopTimeline(); }

EngineMetrics Engine::Metrics() const { return impl_->Metrics(); }

std::shared_ptr<Buffer> Engine::ResultBuffer(size_t bytes) {
  return impl_->ResultBuffer(bytes);
}

Status Engine::Shutdown() { return impl_->Shutdown(); }

}  // namespace horovod
