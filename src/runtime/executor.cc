#include "runtime/executor.h"

#include <algorithm>
#include <cstring>

#include "collectives/adasum.h"
#include "collectives/collectives.h"
#include "collectives/reduce.h"
#include "collectives/shm_collectives.h"

namespace horovod {
namespace {

int64_t Product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t n = 1;
  for (size_t i = from; i < v.size(); ++i) n *= v[i];
  return n;
}

// How a communicator moves data, as timeline activities name it.
std::string TransportPrefix(const Communicator& comm) {
  return comm.shm() != nullptr ? "SHM_" : comm.size() == 1 ? "LOCAL_" : "TCP_";
}

bool Is(uint8_t op, OpType t) { return op == static_cast<uint8_t>(t); }

// Whether two present entries share memory. Reduced where they lie, the
// later one would read the earlier one's result as its input (in a later
// round); through the fusion buffer each is read before any is written.
bool AnyOverlap(const std::vector<TensorEntry>& entries,
                const std::vector<bool>& present,
                std::vector<std::pair<const char*, const char*>>* ranges) {
  ranges->clear();
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!present[i]) continue;
    const TensorView& t = entries[i].tensor;
    const size_t bytes = t.NumBytes();
    if (bytes == 0) continue;
    for (const void* p : {static_cast<const void*>(t.data), t.input})
      if (p != nullptr) {
        const char* begin = static_cast<const char*>(p);
        ranges->emplace_back(begin, begin + bytes);
      }
  }
  if (ranges->size() < 2) return false;
  std::sort(ranges->begin(), ranges->end());
  for (size_t i = 1; i < ranges->size(); ++i)
    if ((*ranges)[i].first < (*ranges)[i - 1].second) return true;
  return false;
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
      hierarchical_allreduce_(knobs.hierarchical_allreduce) {
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

Status Executor::MakeComm(const std::vector<int>& members,
                          std::unique_ptr<Communicator>* comm) {
  ShmGroup* shm;
  HVD_RETURN_IF_ERROR(ShmFor(members, &shm));
  *comm = std::make_unique<Communicator>(transport_, members, &algo_scratch_,
                                         algo_, shm);
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
  HVD_RETURN_IF_ERROR(MakeComm(members, &plan.all));
  if (hierarchical_allreduce_ && hosts_.size() > static_cast<size_t>(me)) {
    HostSplit split = SplitByHost(members, hosts_, me);
    if (split.useful) {
      HVD_RETURN_IF_ERROR(MakeComm(split.local, &plan.local));
      if (split.leader)
        HVD_RETURN_IF_ERROR(MakeComm(split.leaders, &plan.cross));
    }
  }
  *out = &plans_.emplace(process_set, std::move(plan)).first->second;
  return Status::OK();
}

void Executor::Mark(const Response& r, const char* activity) {
  if (timeline_ == nullptr || !timeline_->active()) return;
  for (const std::string& name : r.names) timeline_->Activity(name, activity);
}

void Executor::MarkTransfer(const Response& r, const Communicator& comm) {
  if (timeline_ == nullptr || !timeline_->active()) return;
  const std::string phase = TransportPrefix(comm) + UpperOpName(r.op);
  for (const std::string& name : r.names) timeline_->Activity(name, phase);
}

void Executor::Finish(TensorEntry& e, const Status& s) {
  e.handle->Complete(s);
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
  if (r.op == static_cast<uint8_t>(ControlOp::kAddProcessSet) ||
      r.op == static_cast<uint8_t>(ControlOp::kRemoveProcessSet)) {
    int id = static_cast<int>(r.sizes[0]);
    if (r.op == static_cast<uint8_t>(ControlOp::kAddProcessSet)) {
      plans_.erase(id);  // a plan left from an earlier set with this id
      sets_->Put(id, std::vector<int>(r.sizes.begin() + 1, r.sizes.end()));
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
  if (Is(r.op, OpType::kJoin)) {
    TensorEntry e;
    if (queue_->Take(TensorKey(0, r.names[0]), &e)) {
      e.handle->int_result = static_cast<int>(r.sizes[0]);
      Finish(e, Status::OK());
    }
    return Status::OK();
  }
  Plan* plan;
  HVD_RETURN_IF_ERROR(PlanFor(r.process_set, &plan));
  if (plan == nullptr) return Status::OK();  // not ours to run
  Communicator& comm = *plan->all;
  switch (static_cast<OpType>(r.op)) {
    case OpType::kAllreduce:
      return Allreduce(r, *plan);
    case OpType::kAllgather:
      return Allgather(r, comm);
    case OpType::kBroadcast:
      return Broadcast(r, comm);
    case OpType::kAlltoall:
      return Alltoall(r, comm);
    case OpType::kReducescatter:
      return Reducescatter(r, comm);
    case OpType::kBarrier: {
      TensorEntry e;
      if (queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
        Finish(e, Status::OK());
      return Status::OK();
    }
    default:
      return Status::Internal("unknown response op");
  }
}

Status Executor::Allreduce(const Response& r, Plan& plan) {
  queue_->TakeMany(r.process_set, r.names, &entries_, &present_);
  const ReduceOp op =
      r.reduce_op == ReduceOp::kAverage ? ReduceOp::kSum : r.reduce_op;
  double post = r.postscale;
  if (r.reduce_op == ReduceOp::kAverage) post /= plan.all->size();
  // Shared memory reads and writes the tensors where they lie; the other
  // algorithms (Adasum among them) want one contiguous buffer.
  Status st = plan.all->shm() != nullptr && plan.local == nullptr &&
                      r.reduce_op != ReduceOp::kAdasum &&
                      !AnyOverlap(entries_, present_, &ranges_)
                  ? AllreduceInPlace(r, *plan.all, op, post)
                  : AllreduceBuffered(r, plan, op, post);
  for (size_t i = 0; i < r.names.size(); ++i)
    if (present_[i]) Done(entries_[i], st);
  entries_.clear();  // keeps the capacity, releases the handles
  return st;
}

Status Executor::AllreduceInPlace(const Response& r, Communicator& comm,
                                  ReduceOp op, double post) {
  const size_t n = r.names.size();
  const size_t esize = DataTypeSize(r.dtype);
  // A joined rank contributes zeros for the tensors it lacks, each in its
  // own stretch of the fusion buffer (they are reduced into, so they must
  // not overlap).
  int64_t missing = 0;
  for (size_t i = 0; i < n; ++i)
    if (!present_[i]) missing += Product(r.shapes[i]);
  char* zeros = nullptr;
  if (missing > 0) {
    zeros = fusion_buffer_.Get(static_cast<size_t>(missing) * esize);
    std::memset(zeros, 0, static_cast<size_t>(missing) * esize);
  }
  pieces_.clear();
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const int64_t count = Product(r.shapes[i]);
    void* data = present_[i] ? entries_[i].tensor.data : zeros;
    const void* src = present_[i] ? entries_[i].tensor.input : nullptr;
    if (!present_[i]) zeros += count * esize;
    // A prescaled operand is scaled where the result goes.
    if (src != nullptr && r.prescale != 1.0) {
      std::memcpy(data, src, static_cast<size_t>(count) * esize);
      src = nullptr;
    }
    pieces_.push_back({data, offset, count, src});
    offset += count;
  }
  for (const Piece& p : pieces_)
    ScaleBuffer(p.data, p.count, r.dtype, r.prescale);
  MarkTransfer(r, comm);
  return ShmAllreduce(*comm.shm(), pieces_.data(), pieces_.size(), r.dtype, op,
                      comm.config().small_allreduce_bytes, post);
}

Status Executor::AllreduceBuffered(const Response& r, Plan& plan, ReduceOp op,
                                   double post) {
  const size_t n = r.names.size();
  const size_t esize = DataTypeSize(r.dtype);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) total += Product(r.shapes[i]);
  // A single tensor is reduced where it lies; several (or a joined rank's
  // zeros) go through the persistent fusion buffer.
  char* buf;
  const bool in_place = n == 1 && present_[0];
  if (in_place) {
    const TensorView& t = entries_[0].tensor;
    buf = static_cast<char*>(t.data);
    if (t.input != nullptr) std::memcpy(buf, t.input, t.NumBytes());
  } else {
    Mark(r, "MEMCPY_IN_FUSION_BUFFER");
    buf = fusion_buffer_.Get(static_cast<size_t>(total) * esize);
    size_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      size_t bytes = static_cast<size_t>(Product(r.shapes[i])) * esize;
      if (present_[i]) {
        const TensorView& t = entries_[i].tensor;
        std::memcpy(buf + off, t.input != nullptr ? t.input : t.data, bytes);
      } else
        std::memset(buf + off, 0, bytes);
      off += bytes;
    }
  }
  ScaleBuffer(buf, total, r.dtype, r.prescale);
  if (r.reduce_op == ReduceOp::kAdasum) {
    // Over every member through the transport, even on one host: its
    // combination needs each tensor's whole vectors, not shared pieces.
    Mark(r, plan.all->size() == 1 ? "LOCAL_ADASUM" : "TCP_ADASUM");
    counts_.clear();
    for (size_t i = 0; i < n; ++i) counts_.push_back(Product(r.shapes[i]));
    HVD_RETURN_IF_ERROR(AdasumAllreduce(*plan.all, buf, counts_, r.dtype));
  } else if (plan.local != nullptr) {
    // Timeline activities such as SHM_HOST_ALLREDUCE, TCP_CROSS_ALLREDUCE.
    PhaseFn phase = [&](const char* name, const Communicator& c) {
      Mark(r, (TransportPrefix(c) + name).c_str());
    };
    HVD_RETURN_IF_ERROR(HierarchicalAllreduce(
        *plan.local, plan.cross.get(), buf, total, r.dtype, op,
        timeline_ != nullptr && timeline_->active() ? &phase : nullptr));
  } else {
    MarkTransfer(r, *plan.all);
    HVD_RETURN_IF_ERROR(horovod::Allreduce(*plan.all, buf, total, r.dtype, op));
  }
  ScaleBuffer(buf, total, r.dtype, post);
  if (!in_place) {
    Mark(r, "MEMCPY_OUT_FUSION_BUFFER");
    size_t off = 0;
    for (size_t i = 0; i < n; ++i) {
      size_t bytes = static_cast<size_t>(Product(r.shapes[i])) * esize;
      if (present_[i]) std::memcpy(entries_[i].tensor.data, buf + off, bytes);
      off += bytes;
    }
  }
  return Status::OK();
}

Status Executor::Allgather(const Response& r, Communicator& comm) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const std::vector<int64_t>& shape = e.tensor.shape;
  const int64_t row = Product(shape, 1) * DataTypeSize(r.dtype);
  std::vector<int64_t> bytes(comm.size());
  int64_t rows = 0;
  for (int m = 0; m < comm.size(); ++m) {
    bytes[m] = r.sizes[m] * row;
    rows += r.sizes[m];
  }
  auto out = std::make_shared<Buffer>(static_cast<size_t>(rows * row));
  MarkTransfer(r, comm);
  Status st = Allgatherv(comm, e.tensor.data, out->data(), bytes);
  e.handle->output = out;
  e.handle->output_shape = shape;
  e.handle->output_shape[0] = rows;
  Done(e, st);
  return st;
}

Status Executor::Broadcast(const Response& r, Communicator& comm) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  int root = 0;
  for (int m = 0; m < comm.size(); ++m)
    if (comm.global_rank(m) == r.root) root = m;
  MarkTransfer(r, comm);
  Status st = horovod::Broadcast(
      comm, e.tensor.data, static_cast<int64_t>(e.tensor.NumBytes()), root);
  Done(e, st);
  return st;
}

Status Executor::Alltoall(const Response& r, Communicator& comm) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const int n = comm.size(), me = comm.rank();
  const int64_t row = Product(e.tensor.shape, 1) * DataTypeSize(r.dtype);
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
  MarkTransfer(r, comm);
  Status st = Alltoallv(comm, e.tensor.data, send, out->data(), recv,
                        max_pair_rows * row);
  e.handle->output = out;
  e.handle->output_shape = e.tensor.shape;
  e.handle->output_shape[0] = rows;
  e.handle->received_splits = splits;
  Done(e, st);
  return st;
}

Status Executor::Reducescatter(const Response& r, Communicator& comm) {
  TensorEntry e;
  if (!queue_->Take(TensorKey(r.process_set, r.names[0]), &e))
    return Status::OK();
  const int n = comm.size(), me = comm.rank();
  const std::vector<int64_t>& shape = e.tensor.shape;
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
  MarkTransfer(r, comm);
  ScaleBuffer(buf, total, r.dtype, r.prescale);
  Status st = ReduceScatter(comm, buf, counts, r.dtype, op);
  char* mine = buf + my_offset * esize;
  ScaleBuffer(mine, counts[me], r.dtype, post);
  auto out = std::make_shared<Buffer>(static_cast<size_t>(counts[me]) * esize);
  std::memcpy(out->data(), mine, static_cast<size_t>(counts[me]) * esize);
  e.handle->output = out;
  e.handle->output_shape = shape;
  if (e.handle->output_shape.empty()) e.handle->output_shape = {1};
  e.handle->output_shape[0] = counts[me] / std::max<int64_t>(row_elems, 1);
  if (row_elems == 0) e.handle->output_shape[0] = dim0 / n + (me < dim0 % n);
  Done(e, st);
  return st;
}

}  // namespace horovod
