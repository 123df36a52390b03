#include "runtime/executor.h"

#include <algorithm>
#include <cstring>

#include "collectives/adasum.h"
#include "collectives/hierarchical_group.h"
#include "collectives/reduce.h"
#include "collectives/shm_collective_group.h"
#include "collectives/tcp_group.h"

namespace horovod {
namespace {

int64_t Product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

}  // namespace

Executor::Executor(Transport* transport, ShmGroup* shm,
                   ShmGroupFactory make_shm, TensorQueue* queue,
                   ProcessSetTable* sets, const Knobs& knobs,
                   Timeline* timeline, std::vector<std::string> hosts)
    : transport_(transport),
      shm_(shm),
      make_shm_(std::move(make_shm)),
      queue_(queue),
      sets_(sets),
      timeline_(timeline),
      hosts_(std::move(hosts)),
      hierarchy_{knobs.hierarchical_allreduce, knobs.hierarchical_allgather,
                 false, knobs.hierarchical_striped} {
  algo_.small_allreduce_bytes = knobs.small_allreduce_bytes;
  algo_.ring_chunk_bytes = knobs.ring_chunk_bytes;
}

void Executor::SetSmallAllreduceBytes(int64_t bytes) {
  algo_.small_allreduce_bytes = bytes;
  plans_.clear();  // their communicators hold the old setting; rare
}

Status Executor::ShmFor(const std::vector<int>& members, ShmGroup** group) {
  *group = nullptr;
  if (shm_ != nullptr && shm_->members() == members) {
    *group = shm_;
    return Status::OK();
  }
  const int me = transport_->rank();
  if (!make_shm_ || members.size() < 2 ||
      hosts_.size() <= static_cast<size_t>(me))
    return Status::OK();
  for (int m : members)
    if (hosts_[m] != hosts_[me]) return Status::OK();
  auto it = groups_.find(members);
  if (it == groups_.end()) {
    // Every member reaches this at the same point of the response stream:
    // the set's first collective (or the first after it was dropped).
    std::unique_ptr<ShmGroup> g;
    HVD_RETURN_IF_ERROR(make_shm_(members, &g));
    std::lock_guard<std::mutex> lock(groups_mu_);
    it = groups_.emplace(members, std::move(g)).first;
  }
  *group = it->second.get();  // null: these ranks could not share memory
  return Status::OK();
}

Status Executor::MakeGroup(const std::vector<int>& members,
                           std::unique_ptr<CollectiveGroup>* group) {
  ShmGroup* shm;
  HVD_RETURN_IF_ERROR(ShmFor(members, &shm));
  if (shm != nullptr)
    *group = std::make_unique<ShmCollectiveGroup>(shm, algo_, &fusion_buffer_);
  else
    *group = std::make_unique<TcpGroup>(
        Communicator(transport_, members, &algo_scratch_, algo_),
        &fusion_buffer_);
  return Status::OK();
}

Status Executor::PlanFor(int process_set, Plan** out) {
  *out = nullptr;
  auto it = plans_.find(process_set);
  if (it != plans_.end()) {
    *out = &it->second;
    return Status::OK();
  }
  std::vector<int> members;
  const int me = transport_->rank();
  if (!sets_->Get(process_set, &members) ||
      std::find(members.begin(), members.end(), me) == members.end())
    return Status::OK();
  Plan plan;
  HVD_RETURN_IF_ERROR(MakeGroup(members, &plan.group));
  if ((hierarchy_.reductions || hierarchy_.movement) &&
      hosts_.size() > static_cast<size_t>(me)) {
    HostSplit split = SplitByHost(members, hosts_, me);
    if (split.useful) {
      std::unique_ptr<CollectiveGroup> local, cross, stripe;
      HVD_RETURN_IF_ERROR(MakeGroup(split.local, &local));
      if (split.leader) HVD_RETURN_IF_ERROR(MakeGroup(split.leaders, &cross));
      if (split.even && hierarchy_.striped)
        HVD_RETURN_IF_ERROR(MakeGroup(split.stripe, &stripe));
      // The leader's cross-host phase may run beside the host's only
      // when those use shared memory (the transport takes one thread).
      Hierarchy hierarchy = hierarchy_;
      ShmGroup* host_shm = nullptr;
      HVD_RETURN_IF_ERROR(ShmFor(split.local, &host_shm));
      hierarchy.overlap = host_shm != nullptr;
      plan.group = std::make_unique<HierarchicalGroup>(
          split, hierarchy, std::move(local), std::move(cross),
          std::move(stripe), std::move(plan.group), &fusion_buffer_);
    }
  }
  plan.p2p = std::make_unique<TcpGroup>(
      Communicator(transport_, members, &algo_scratch_, algo_),
      &fusion_buffer_);
  *out = &plans_.emplace(process_set, std::move(plan)).first->second;
  return Status::OK();
}

void Executor::Mark(const Response& r, const char* activity) {
  if (timeline_ == nullptr || !timeline_->active()) return;
  for (const std::string& name : r.names) timeline_->Activity(name, activity);
}

void Executor::MarkTransfer(const Response& r, const CollectiveGroup& g) {
  if (timeline_ == nullptr || !timeline_->active()) return;
  const std::string phase = g.kind() + UpperOpName(r.op);
  for (const std::string& name : r.names) timeline_->Activity(name, phase);
}

void Executor::Finish(TensorEntry& e, const Status& s) { Finish(*e.handle, s); }

void Executor::Finish(HandleState& state, const Status& s) {
  state.Complete(s);
}

void Executor::Count(const TensorEntry& e) { Count(1, e.NumBytes()); }

void Executor::Count(uint64_t tensors, int64_t bytes) {
  tensors_.Add(tensors);
  bytes_.Add(static_cast<uint64_t>(bytes));
}

ExecutorWork Executor::Work() const {
  ExecutorWork w;
  w.responses = responses_.Get();
  w.tensors = tensors_.Get();
  w.bytes = bytes_.Get();
  return w;
}

ExecutorStats Executor::TakeStats() {
  ExecutorStats s = stats_;
  stats_ = ExecutorStats();
  return s;
}

void Executor::BeginPhases() {
  phase_start_ = std::chrono::steady_clock::now();
  phase_copies_ = false;
  responses_.Add(1);
}

void Executor::Phase(const Response& r, const char* prefix, const char* name) {
  EndPhases();
  phase_copies_ = std::strncmp(name, "MEMCPY", 6) == 0;
  if (timeline_ != nullptr && timeline_->active())
    Mark(r, (std::string(prefix) + name).c_str());
}

void Executor::EndPhases() {
  const auto now = std::chrono::steady_clock::now();
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now - phase_start_)
          .count();
  (phase_copies_ ? stats_.copy_ns : stats_.transfer_ns) += ns;
  phase_start_ = now;
}

// Collectives fail only when the transport does; such entries wait for
// FailBroken so their error names the rank that died.
void Executor::Done(TensorEntry& e, const Status& s) {
  if (s.ok())
    Finish(e, s);
  else
    broken_.push_back(std::move(e));
}

void Executor::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(groups_mu_);
  for (auto& kv : groups_)
    if (kv.second != nullptr) kv.second->Abort(reason);
}

void Executor::FailBroken(const Status& status) {
  for (auto& e : broken_) Finish(e, e.Failure(status));
  broken_.clear();
}

Status Executor::Execute(const Response& r) {
  if (r.error) {
    for (const auto& name : r.names) {
      TensorEntry e;
      if (queue_->Take(TensorKey(r.process_set, name), &e))
        Finish(e, Status::Mismatch(r.error_message));
    }
    return Status::OK();
  }
  if (r.op == Op::kAddProcessSet || r.op == Op::kRemoveProcessSet) {
    const int id = r.set_id;
    if (r.op == Op::kAddProcessSet) {
      plans_.erase(id);  // a plan left from an earlier set with this id
      sets_->Put(id, std::vector<int>(r.set_ranks.begin(), r.set_ranks.end()));
    } else {
      sets_->Remove(id);
      // A group is shared by every plan over the same ranks; the survivors
      // rebuild theirs on next use, collectively again. Removal is rare.
      plans_.clear();
      std::lock_guard<std::mutex> lock(groups_mu_);
      groups_.clear();
    }
    TensorEntry e;
    if (queue_->Take(TensorKey(0, r.names[0]), &e)) {
      e.handle->int_result = id;
      Finish(e, Status::OK());
    }
    return Status::OK();
  }
  if (r.op == Op::kJoin) {
    TensorEntry e;
    if (queue_->Take(TensorKey(0, r.names[0]), &e)) {
      e.handle->int_result = r.last_joined;
      Finish(e, Status::OK());
    }
    return Status::OK();
  }
  Plan* plan;
  HVD_RETURN_IF_ERROR(PlanFor(r.process_set, &plan));
  if (plan == nullptr) return Status::OK();  // not ours to run
  CollectiveGroup& g = *plan->group;
  switch (r.op) {
    case Op::kAllreduce:
      return Allreduce(r, *plan);
    case Op::kAllgather:
      return Allgather(r, g);
    case Op::kBroadcast:
      return Broadcast(r, g);
    case Op::kAlltoall:
      return Alltoall(r, g);
    case Op::kReducescatter:
      return Reducescatter(r, g);
    case Op::kBarrier: {
      TensorEntry e;
      if (queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
        Finish(e, Status::OK());
      return Status::OK();
    }
    default:
      return Status::Internal("unknown response op");
  }
}

void Executor::ReduceCopies(const Response& r, TensorEntry* entry,
                            const char* const* copies, int members) {
  if (entry == nullptr) return;
  TensorEntry& e = *entry;
  const int64_t count = Product(r.shapes[0]);
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(r.dtype);
  ReduceOp op = r.reduce_op;
  double post = r.postscale;
  if (op == ReduceOp::kAverage) {
    op = ReduceOp::kSum;
    post /= members;
  }
  // In member order, so every rank gets the same bits; the last pass
  // scales.
  void* out = e.tensor.data;
  if (members == 1) {
    std::memcpy(out, copies[0], bytes);
    ScaleBuffer(out, count, r.dtype, post);
  }
  for (int m = 1; m < members; ++m)
    ReduceOfScaled(out, nullptr, m == 1 ? copies[0] : out, copies[m], count,
                   r.dtype, op, m == members - 1 ? post : 1.0);
  Count(e);
  Finish(e, Status::OK());
}

Status Executor::AllreduceEntries(const Response& r,
                                  TensorEntry* const* entries,
                                  const int64_t* counts) {
  Plan* plan;
  HVD_RETURN_IF_ERROR(PlanFor(r.process_set, &plan));
  if (plan == nullptr) return Status::OK();  // not ours to run
  return Allreduce(r, *plan, entries, counts);
}

Status Executor::Allreduce(const Response& r, Plan& plan) {
  queue_->ClaimNamed(r.process_set, r.names, r.slots, &records_, &claimed_);
  Status st = Allreduce(r, plan, claimed_.data());
  queue_->Release(records_.data(), records_.size());
  return st;
}

Status Executor::Allreduce(const Response& r, Plan& plan,
                           TensorEntry* const* entries, const int64_t* counts) {
  const size_t n = r.shapes.size();  // the board's may come without names
  const size_t esize = DataTypeSize(r.dtype);
  // Adasum takes the counts as a vector; the board's are used where they
  // lie.
  counts_.clear();
  if (counts == nullptr || r.reduce_op == ReduceOp::kAdasum) {
    for (size_t i = 0; i < n; ++i)
      counts_.push_back(counts != nullptr ? counts[i] : Product(r.shapes[i]));
    counts = counts_.data();
  }
  // A joined rank contributes zeros for the tensors it lacks, each in its
  // own stretch (they may be reduced into, so they must not overlap).
  int64_t missing = 0;
  for (size_t i = 0; i < n; ++i)
    if (entries[i] == nullptr) missing += counts[i];
  char* zeros = nullptr;
  if (missing > 0) {
    zeros = zeros_.Get(static_cast<size_t>(missing) * esize);
    std::memset(zeros, 0, static_cast<size_t>(missing) * esize);
  }
  // Capacities kept from step to step. Each entry's completion state is
  // noted while its line is at hand: the data moved next pushes the
  // entries out of the caches, and completing through them would fetch
  // each again before its state.
  pieces_.resize(n);
  states_.resize(n);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t count = counts[i];
    if (i + kRecordsAhead < n && entries[i + kRecordsAhead] != nullptr)
      __builtin_prefetch(&entries[i + kRecordsAhead]->tensor);
    if (entries[i] != nullptr) {
      pieces_[i] = {entries[i]->tensor.data, offset, count,
                    entries[i]->tensor.input};
      states_[i] = entries[i]->handle.get();
    } else {
      pieces_[i] = {zeros, offset, count};
      states_[i] = nullptr;
      zeros += count * esize;
    }
    offset += count;
  }
  ReduceArgs args{r.dtype, r.reduce_op, r.prescale, r.postscale};
  if (r.reduce_op == ReduceOp::kAverage) {
    args.op = ReduceOp::kSum;
    args.postscale /= plan.group->size();
  }
  PhaseFn phase = [this, &r](const char* prefix, const char* name) {
    Phase(r, prefix, name);
  };
  Status st;
  BeginPhases();
  if (r.reduce_op == ReduceOp::kAdasum) {
    // Over every member through the transport, even on one host: its
    // combination needs each tensor's whole vectors, not shared pieces.
    TcpGroup& p2p = *plan.p2p;
    st = AllreducePacked(pieces_.data(), n, args, &fusion_buffer_, &phase,
                         [&](char* buf, int64_t count) {
                           Phase(r, p2p.kind(), "ADASUM");
                           HVD_RETURN_IF_ERROR(AdasumAllreduce(
                               p2p.comm(), buf, counts_, r.dtype));
                           ScaleBuffer(buf, count, r.dtype, args.postscale);
                           return Status::OK();
                         });
  } else {
    st = plan.group->Allreduce(pieces_.data(), n, args, &phase);
  }
  EndPhases();
  // Counted in one go, before any handle completes. The data has pushed
  // the completion states out of the nearer caches, and each completion's
  // atomics wait for its own state: fetched all together in the same pass,
  // they arrive while the completions run.
  uint64_t tensors = 0;
  int64_t bytes = 0;
  for (size_t i = 0; i < n; ++i)
    if (states_[i] != nullptr) {
      __builtin_prefetch(states_[i], 1);
      ++tensors;
      bytes += counts[i] * static_cast<int64_t>(esize);
    }
  Count(tensors, bytes);
  if (!st.ok()) {  // the entries kept whole, to fail once the loop knows why
    for (size_t i = 0; i < n; ++i)
      if (entries[i] != nullptr) Done(*entries[i], st);
    return st;
  }
  for (size_t i = 0; i < n; ++i)
    if (states_[i] != nullptr) Finish(*states_[i], st);
  return st;
}

Status Executor::Allgather(const Response& r, CollectiveGroup& g) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const std::vector<int64_t>& shape = e.request.shape;
  const int64_t row = Product(shape, 1) * DataTypeSize(r.dtype);
  std::vector<int64_t> bytes(g.size());
  int64_t rows = 0;
  for (int m = 0; m < g.size(); ++m) {
    bytes[m] = r.sizes[m] * row;
    rows += r.sizes[m];
  }
  auto out = std::make_shared<Buffer>(static_cast<size_t>(rows * row));
  MarkTransfer(r, g);
  BeginPhases();
  Status st = g.Allgatherv(e.tensor.data, out->data(), bytes);
  EndPhases();
  Count(e);
  e.handle->SetOutput(std::move(out));
  e.handle->output_shape = shape;
  e.handle->output_shape[0] = rows;
  Done(e, st);
  return st;
}

Status Executor::Broadcast(const Response& r, CollectiveGroup& g) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  int root = 0;
  for (int m = 0; m < g.size(); ++m)
    if (g.global_rank(m) == r.root) root = m;
  MarkTransfer(r, g);
  BeginPhases();
  Status st = g.Broadcast(e.tensor.data, e.NumBytes(), root);
  EndPhases();
  Count(e);
  Done(e, st);
  return st;
}

Status Executor::Alltoall(const Response& r, CollectiveGroup& g) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const int n = g.size(), me = g.rank();
  const int64_t row = Product(e.request.shape, 1) * DataTypeSize(r.dtype);
  std::vector<int64_t> send(n), recv(n), splits(n);
  int64_t rows = 0;
  const int64_t max_pair_rows =
      *std::max_element(r.sizes.begin(), r.sizes.begin() + n * n);
  for (int m = 0; m < n; ++m) {
    send[m] = r.sizes[me * n + m] * row;
    splits[m] = r.sizes[m * n + me];
    recv[m] = splits[m] * row;
    rows += splits[m];
  }
  auto out = std::make_shared<Buffer>(static_cast<size_t>(rows * row));
  MarkTransfer(r, g);
  BeginPhases();
  Status st =
      g.Alltoallv(e.tensor.data, send, out->data(), recv, max_pair_rows * row);
  EndPhases();
  Count(e);
  e.handle->SetOutput(std::move(out));
  e.handle->output_shape = e.request.shape;
  e.handle->output_shape[0] = rows;
  e.handle->received_splits = splits;
  Done(e, st);
  return st;
}

Status Executor::Reducescatter(const Response& r, CollectiveGroup& g) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const int n = g.size(), me = g.rank();
  const std::vector<int64_t>& shape = e.request.shape;
  const int64_t dim0 = shape.empty() ? 1 : shape[0];
  const int64_t row_elems = Product(shape, 1);
  const size_t esize = DataTypeSize(r.dtype);
  // Upstream's split: the first dim0 % n members get one extra row.
  std::vector<int64_t> counts(n);
  int64_t my_offset = 0;
  for (int m = 0; m < n; ++m) {
    counts[m] = (dim0 / n + (m < dim0 % n ? 1 : 0)) * row_elems;
    if (m < me) my_offset += counts[m];
  }
  int64_t total = dim0 * row_elems;
  char* buf = fusion_buffer_.Get(static_cast<size_t>(total) * esize);
  std::memcpy(buf, e.tensor.data, static_cast<size_t>(total) * esize);
  ReduceOp op =
      r.reduce_op == ReduceOp::kAverage ? ReduceOp::kSum : r.reduce_op;
  double post = r.postscale;
  if (r.reduce_op == ReduceOp::kAverage) post /= n;
  MarkTransfer(r, g);
  ScaleBuffer(buf, total, r.dtype, r.prescale);
  BeginPhases();
  Status st = g.ReduceScatter(buf, counts, r.dtype, op);
  EndPhases();
  Count(e);
  char* mine = buf + my_offset * esize;
  ScaleBuffer(mine, counts[me], r.dtype, post);
  auto out = std::make_shared<Buffer>(static_cast<size_t>(counts[me]) * esize);
  std::memcpy(out->data(), mine, static_cast<size_t>(counts[me]) * esize);
  e.handle->SetOutput(std::move(out));
  e.handle->output_shape = shape;
  if (e.handle->output_shape.empty()) e.handle->output_shape = {1};
  e.handle->output_shape[0] = counts[me] / std::max<int64_t>(row_elems, 1);
  if (row_elems == 0) e.handle->output_shape[0] = dim0 / n + (me < dim0 % n);
  Done(e, st);
  return st;
}

}  // namespace horovod
