// EngineImpl, submission: enqueueing requests after checking them, and the
// thread census that tells rank 0 when every thread of this rank waits.
#include "runtime/engine_impl.h"

namespace horovod {

namespace {

// This thread's membership in one engine's census; leaves it at exit.
struct CensusRecord {
  std::shared_ptr<ThreadCensus> census;
  ~CensusRecord() {
    if (census) census->live.fetch_sub(1);
  }
};
thread_local CensusRecord tls_census;
// The census tls_census holds, as a plain pointer: every submission reads
// it, and a trivial thread-local needs no initialization guard on access.
// Never stale: the record keeps the census it points to alive.
thread_local const ThreadCensus* tls_counted = nullptr;

// `*out` = the name of member i of n tensors enqueued under `base`:
// upstream's form for a group's members, <base>_<k>of<n>. Assigned, so a
// steady caller's string keeps its capacity.
void NameMember(const std::string& base, size_t i, size_t n, std::string* out) {
  out->assign(base);
  if (n > 1) *out += "_" + std::to_string(i + 1) + "of" + std::to_string(n);
}

}  // namespace

void EngineImpl::LeaveCensus() {
  if (tls_census.census != census_) return;
  census_->live.fetch_sub(1);
  tls_census.census.reset();
  tls_counted = nullptr;
  std::lock_guard<std::mutex> lock(waiting_mu_);
  episode_.fetch_add(1);
  report_due_.store(
      Blocked() ? (Clock::now() + kWaitReportAfter).time_since_epoch().count()
                : kNever);
}

void EngineImpl::CountSubmitter() {
  if (__builtin_expect(tls_counted == census_.get(), 1)) return;
  JoinCensus();
}

Status EngineImpl::Enqueue(OpType op, const TensorView* tensors, size_t n,
                           const CollectiveArgs& args, Handle* handles) {
  CountSubmitter();
  // Every rank is in set 0, which never changes: the common call takes no
  // lock for it.
  std::shared_ptr<const std::vector<int>> set;
  if (args.process_set != 0) {
    set = sets_.Find(args.process_set);
    if (set == nullptr)
      return Status::InvalidArgument(
          "process set " + std::to_string(args.process_set) +
          " is not registered on rank " + std::to_string(job_.rank));
    if (std::find(set->begin(), set->end(), job_.rank) == set->end())
      return Status::InvalidArgument("rank " + std::to_string(job_.rank) +
                                     " is not a member of process set " +
                                     std::to_string(args.process_set));
  }
  const std::vector<int>& members = set ? *set : sets_.global();
  if (n == 0) return Status::OK();
  // A steady step resubmits what its record holds: compared in place, not
  // built, checked and compared again.
  if (n == 1 && op == OpType::kAllreduce && args.process_set == 0 &&
      !args.name.empty() && args.splits.empty() && tensors[0].data != nullptr &&
      queue_.AddAgain({args.name, tensors[0], args.op, args.root, args.prescale,
                       args.postscale, job_.rank},
                      handles))
    return Status::OK();
  // This thread's entries from its last call, rewritten in place: the
  // queue copies them into its records, and their strings and shapes keep
  // their capacity, so a steady step allocates none.
  thread_local std::vector<TensorEntry> scratch;
  if (scratch.size() < n) scratch.resize(n);
  TensorEntry* entries = scratch.data();
  std::string group;
  const std::string auto_name = args.name.empty() ? AutoName(op) : "";
  const std::string& base = args.name.empty() ? auto_name : args.name;
  for (size_t i = 0; i < n; ++i) {
    TensorEntry& e = entries[i];
    Request& r = e.request;
    r.rank = job_.rank;
    r.op = ToOp(op);
    NameMember(base, i, n, &r.name);
    r.dtype = tensors[i].dtype;
    r.reduce_op = args.op;
    r.root = args.root;
    r.device = tensors[i].device;
    r.process_set = args.process_set;
    r.prescale = args.prescale;
    r.postscale = args.postscale;
    r.shape = tensors[i].shape;
    r.splits.clear();
    if (n > 1) {
      if (i == 0) group = r.name;
      r.group = group;
      r.group_size = static_cast<int32_t>(n);
    } else {
      r.group.clear();
      r.group_size = 0;
    }
    Status st = CheckRequest(op, tensors[i], args, members, job_.rank, &r);
    if (!st.ok()) return RefuseNamed(op, base, n, args.process_set, st);
    // The shape travels in the request; the view keeps where the data is.
    e.tensor.data = tensors[i].data;
    e.tensor.dtype = tensors[i].dtype;
    e.tensor.device = tensors[i].device;
    e.tensor.input = tensors[i].input;
  }
  return queue_.Add(entries, n, handles);
}

Status EngineImpl::Refuse(OpType op, size_t n, const CollectiveArgs& args,
                          const Status& why) {
  if (!IsMember(args.process_set)) return why;
  CountSubmitter();  // it waits below, as a submitter
  return RefuseNamed(op, args.name.empty() ? AutoName(op) : args.name, n,
                     args.process_set, why);
}

bool EngineImpl::IsMember(int process_set) const {
  if (process_set == 0) return true;
  std::shared_ptr<const std::vector<int>> set = sets_.Find(process_set);
  return set != nullptr &&
         std::find(set->begin(), set->end(), job_.rank) != set->end();
}

Status EngineImpl::RefuseNamed(OpType op, const std::string& base, size_t n,
                               int process_set, const Status& why) {
  // A name the messages cannot carry cannot be refused either: the peers
  // find this rank's absence through the deadlock check instead.
  if (n == 0) return why;
  std::string last;
  NameMember(base, n - 1, n, &last);
  if (last.size() > kWireMaxName) return why;
  std::vector<TensorEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    Request& r = entries[i].request;
    r.rank = job_.rank;
    r.op = ToOp(op);
    r.process_set = process_set;
    NameMember(base, i, n, &r.name);
    if (n > 1) {
      r.group = entries[0].request.name;
      r.group_size = static_cast<int32_t>(n);
    }
    r.refusal = why.message().substr(0, kWireMaxRefusal);
  }
  // Waited for, so that this rank goes on from where the others do: every
  // member's call of the operation has failed when this one returns. The
  // engine's deadlines end the wait when a member never calls it.
  std::vector<Handle> handles(n);
  if (!queue_.Add(entries.data(), n, handles.data()).ok()) return why;
  for (const Handle& h : handles) h.Wait();
  return why;
}

Status EngineImpl::EnqueueControl(Request request, Handle* handle) {
  CountSubmitter();
  TensorEntry e;
  e.request = std::move(request);
  e.request.rank = job_.rank;
  e.request.dtype = DataType::kUInt8;
  return queue_.Add(&e, 1, handle);
}

std::string EngineImpl::AutoName(OpType op) {
  return std::string(OpTypeName(op)) + ".noname." +
         std::to_string(auto_name_counter_[static_cast<int>(op)]++);
}

void EngineImpl::JoinCensus() {
  if (tls_census.census) tls_census.census->live.fetch_sub(1);
  tls_census.census = census_;
  tls_counted = census_.get();
  census_->live.fetch_add(1);
}

void EngineImpl::OnWait(const HandleState& h, bool begin,
                        Clock::time_point now) {
  const bool submitter = tls_census.census == census_;
  std::lock_guard<std::mutex> lock(waiting_mu_);
  if (begin) {
    waiters_.push_back(&h);
    if (submitter) census_->waiting.fetch_add(1);
  } else {
    auto it = std::find(waiters_.begin(), waiters_.end(), &h);
    if (it != waiters_.end()) {
      *it = waiters_.back();
      waiters_.pop_back();
    }
    if (submitter) census_->waiting.fetch_sub(1);
  }
  episode_.fetch_add(1);
  report_due_.store(
      Blocked() ? (now + kWaitReportAfter).time_since_epoch().count() : kNever);
}

bool EngineImpl::Blocked() const {
  const int live = census_->live.load();
  return live > 0 && census_->waiting.load() >= live && !waiters_.empty();
}

void EngineImpl::TakeWaiting(RequestList* list, Clock::time_point now) {
  const int64_t ticks = now.time_since_epoch().count();
  if (ticks >= report_due_.load()) {
    std::lock_guard<std::mutex> lock(waiting_mu_);
    // Under the lock: a wait that began meanwhile set a later due time.
    if (ticks >= report_due_.load()) {
      report_due_.store(kNever);
      if (Blocked()) {  // still (a new thread may have submitted since)
        list->waiting_update = true;
        list->waiting = queue_.KeysOf(waiters_);
        reported_episode_ = episode_.load();
        rank0_has_waits_ = true;
        return;
      }
    }
  }
  const bool news =
      !list->requests.empty() || !list->cache_hits.empty() || list->shutdown;
  if (rank0_has_waits_ && news && episode_.load() != reported_episode_) {
    list->waiting_update = true;  // that wait is over
    rank0_has_waits_ = false;
  }
}

int EngineImpl::WaitReportDueMs(Clock::time_point now) const {
  const int64_t due = report_due_.load();
  if (due == kNever) return 1000;
  const auto left = Clock::duration(due) - now.time_since_epoch();
  return static_cast<int>(std::clamp<int64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1,
      0, 1000));
}

}  // namespace horovod
