// EngineImpl: owns the parts of a running engine and runs its loop. One
// loop iteration (Step):
//   1. take newly enqueued requests (as cache slots when cached);
//   2. rank 0: fold them and the workers' lists into the Coordinator and,
//      when it says so, broadcast a response list; workers: send their list
//      to rank 0 and wait for response lists;
//   3. execute each response list in order (same order on every rank).
// The loop sleeps in poll(2) on the queue's eventfd and the control sockets,
// or on the shared-memory doorbell, so it wakes on enqueue or on a message.
//
// Who drives: the loop thread by default; but a thread that waits on a
// handle (a synchronous collective) runs the steps itself, holding drive_mu_
// (DriveGate), and the loop thread parks until no caller has driven for
// kParkGrace. Everything the steps touch is used under drive_mu_ only.
#include "horovod/engine.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "autotune/autotuner.h"
#include "collectives/adasum.h"
#include "common/knobs.h"
#include "common/logging.h"
#include "coordination/coordinator.h"
#include "coordination/wire.h"
#include "rendezvous/rendezvous.h"
#include "runtime/executor.h"
#include "runtime/peer_liveness.h"
#include "runtime/process_memory.h"
#include "runtime/process_set_table.h"
#include "runtime/tensor_queue.h"
#include "timeline/timeline.h"
#include "transport/control_link.h"
#include "transport/loopback_transport.h"
#include "transport/shm_group.h"
#include "transport/tcp_transport.h"

namespace horovod {

namespace {

// Which threads submit to an engine, and how many of them are blocked in a
// wait. A rank whose every submitting thread waits can submit nothing new
// until a wait ends; only then are its waits news for rank 0's deadlock
// check (a rank with one thread still running may yet submit what the
// others wait for). Shared by the engine and each thread's record.
struct ThreadCensus {
  std::atomic<int> live{0};     // threads that enqueued and have not exited
  std::atomic<int> waiting{0};  // of those, blocked in Handle::Wait now
};

// This thread's membership in one engine's census; leaves it at exit.
struct CensusRecord {
  std::shared_ptr<ThreadCensus> census;
  ~CensusRecord() {
    if (census) census->live.fetch_sub(1);
  }
};
thread_local CensusRecord tls_census;

constexpr size_t kMaxControlFrame = 64u << 20;
constexpr double kShutdownWaitS = 30;
// A rank reports what it waits on once it has stayed blocked this long.
constexpr auto kWaitReportAfter = std::chrono::milliseconds(50);
// How long the loop thread stays parked after the last waiting caller
// stopped driving: back-to-back synchronous calls then never wake it, and
// work nobody waits for yet (async ops, rank 0 coordinating idle ranks)
// starts at most this late.
constexpr auto kParkGrace = std::chrono::milliseconds(1);
// How often a waiter that cannot drive yet looks again (try_lock only: a
// blocking lock could outlast the waiter's timeout while the holder waits
// inside a collective).
constexpr auto kDriveRetry = std::chrono::microseconds(50);

std::string ShutdownMessage() {
  return "Horovod has been shut down. This was caused by an exception on one "
         "of the ranks or an attempt to run a collective after shutdown.";
}

}  // namespace

class EngineImpl {
 public:
  EngineImpl(const JobInfo& job, Knobs knobs)
      : job_(job),
        knobs_(knobs),
        cache_(knobs.cache_capacity),
        sets_(job.size) {}

  ~EngineImpl() { Shutdown(); }

  Status Start() {
    Mesh mesh;
    HVD_RETURN_IF_ERROR(EstablishMesh(job_, &mesh));
    if (job_.size == 1) {
      fabric_ = std::make_unique<LoopbackFabric>(1);
      transport_ = std::make_unique<LoopbackTransport>(fabric_.get(), 0);
    } else {
      auto tcp = std::make_unique<TcpTransport>(job_.rank, std::move(mesh.data),
                                                knobs_.operation_timeout_s);
      HVD_RETURN_IF_ERROR(JoinSharedMemory(tcp.get(), mesh.hosts));
      transport_ = std::move(tcp);
    }
    UseControlLinks(std::move(mesh.control));
    liveness_ = std::make_unique<PeerLiveness>(
        job_.rank == 0 ? job_.size - 1 : 1, knobs_.operation_timeout_s,
        Clock::now());
    if (job_.rank == 0) {
      CoordinatorConfig cc;
      cc.size = job_.size;
      cc.fusion_threshold = knobs_.fusion_threshold;
      cc.cycle_time_s = knobs_.cycle_time_ms / 1000.0;
      cc.stall_check_s = knobs_.stall_check_s;
      cc.stall_check = !knobs_.stall_check_disable;
      cc.stall_shutdown_s = knobs_.stall_shutdown_s;
      coordinator_ = std::make_unique<Coordinator>(cc, &cache_);
      if (knobs_.autotune) {
        AutotuneConfig ac;
        ac.tune_fusion_threshold = !knobs_.fusion_threshold_set;
        ac.tune_cycle_time = !knobs_.cycle_time_set;
        ac.tune_small_allreduce = !knobs_.small_allreduce_bytes_set;
        ac.warmup_samples = knobs_.autotune_warmup_samples;
        ac.steps_per_sample = knobs_.autotune_steps_per_sample;
        ac.max_samples = knobs_.autotune_max_samples;
        ac.noise = knobs_.autotune_noise;
        ac.log_path = knobs_.autotune_log;
        tuner_ = std::make_unique<Autotuner>(
            ac, TunedParams{knobs_.fusion_threshold, knobs_.cycle_time_ms,
                            knobs_.small_allreduce_bytes});
      }
    }
    if (!knobs_.timeline.empty() && knobs_.timeline != "DYNAMIC") {
      // The job runs without it rather than fail every rank's init.
      Status st = StartTimeline(knobs_.timeline, knobs_.timeline_mark_cycles);
      if (!st.ok()) HVD_LOG(kError, st.message() << " (HOROVOD_TIMELINE)");
    }
    executor_ = std::make_unique<Executor>(transport_.get(), shm_.get(),
                                           make_shm_, &queue_, &sets_, knobs_,
                                           &timeline_, std::move(mesh.hosts));
    DriveGate::DriveFn drive;
    if (knobs_.caller_drives)
      drive = [this](HandleState& h, DriveGate::TimePoint until) {
        DriveUntil(h, until);
      };
    gate_ = std::make_shared<DriveGate>(
        std::move(drive),
        [this](const HandleState& h, bool begin) { OnWait(h, begin); });
    thread_ = std::thread([this] { Loop(); });
    return Status::OK();
  }

  const JobInfo& job() const { return job_; }

  // Only rank 0 records: it sees every rank's negotiation.
  Status StartTimeline(const std::string& path, bool mark_cycles) {
    if (job_.rank != 0) return Status::OK();
    return timeline_.Start(path, mark_cycles);
  }
  void StopTimeline() { timeline_.Stop(); }
  ProcessSetTable& sets() { return sets_; }

  // The calling thread stops counting as a submitter until it submits
  // again: it has nothing outstanding, and the rank's other threads may
  // now all be waiting.
  void LeaveCensus() {
    if (tls_census.census != census_) return;
    census_->live.fetch_sub(1);
    tls_census.census.reset();
    std::lock_guard<std::mutex> lock(waiting_mu_);
    episode_.fetch_add(1);
    report_due_.store(
        Blocked() ? (Clock::now() + kWaitReportAfter).time_since_epoch().count()
                  : kNever);
  }

  Status Enqueue(OpType op, const std::vector<TensorView>& tensors,
                 const CollectiveArgs& args, std::vector<Handle>* handles) {
    CountSubmitter();
    std::shared_ptr<const std::vector<int>> set = sets_.Find(args.process_set);
    if (set == nullptr)
      return Status::InvalidArgument(
          "process set " + std::to_string(args.process_set) +
          " is not registered on rank " + std::to_string(job_.rank));
    const std::vector<int>& members = *set;
    if (std::find(members.begin(), members.end(), job_.rank) == members.end())
      return Status::InvalidArgument("rank " + std::to_string(job_.rank) +
                                     " is not a member of process set " +
                                     std::to_string(args.process_set));
    std::vector<TensorEntry> entries;
    handles->clear();
    std::string group;
    const std::string auto_name = args.name.empty() ? AutoName(op) : "";
    const std::string& base = args.name.empty() ? auto_name : args.name;
    for (size_t i = 0; i < tensors.size(); ++i) {
      TensorEntry e;
      Request& r = e.request;
      r.rank = job_.rank;
      r.op = static_cast<uint8_t>(op);
      r.name = base;
      // Upstream's form for the members of a group: <base>_<k>of<n>.
      if (tensors.size() > 1)
        r.name +=
            "_" + std::to_string(i + 1) + "of" + std::to_string(tensors.size());
      r.dtype = tensors[i].dtype;
      r.reduce_op = args.op;
      r.root = args.root;
      r.device = tensors[i].device;
      r.process_set = args.process_set;
      r.prescale = args.prescale;
      r.postscale = args.postscale;
      r.shape = tensors[i].shape;
      if (tensors.size() > 1) {
        if (i == 0) group = r.name;
        r.group = group;
        r.group_size = static_cast<int32_t>(tensors.size());
      }
      HVD_RETURN_IF_ERROR(Validate(op, tensors[i], args, members, &r));
      e.tensor = tensors[i];
      e.handle = std::make_shared<HandleState>();
      e.handle->gate = gate_;
      e.handle->dtype = tensors[i].dtype;
      handles->emplace_back(e.handle);
      entries.push_back(std::move(e));
    }
    return queue_.Add(std::move(entries));
  }

  Status EnqueueControl(uint8_t op, const std::string& name,
                        std::vector<int64_t> shape, int root, int process_set,
                        Handle* handle) {
    CountSubmitter();
    TensorEntry e;
    e.request.rank = job_.rank;
    e.request.op = op;
    e.request.name = name;
    e.request.shape = std::move(shape);
    e.request.root = root;
    e.request.process_set = process_set;
    e.request.dtype = DataType::kUInt8;
    e.handle = std::make_shared<HandleState>();
    e.handle->gate = gate_;
    *handle = Handle(e.handle);
    std::vector<TensorEntry> v;
    v.push_back(std::move(e));
    return queue_.Add(std::move(v));
  }

  Status Shutdown() {
    if (!thread_.joinable()) return Status::OK();
    shutdown_requested_.store(true);
    queue_.Wake();
    park_cv_.notify_all();
    // The coordinator ends the job for every rank as soon as one asks; bound
    // the wait in case rank 0 cannot be reached.
    auto until =
        Clock::now() + std::chrono::seconds(static_cast<int>(kShutdownWaitS));
    while (!loop_done_.load() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!loop_done_.load()) {
      Fatal("rank " + std::to_string(job_.rank) +
            " could not reach rank 0 to shut down");
    }
    thread_.join();
    // Waiters still driving leave as soon as they see the loop ended.
    if (gate_) gate_->Close();
    timeline_.Stop();
    queue_.FailAll(Status::Aborted(ShutdownMessage()));
    return Status::OK();
  }

 private:
  std::string AutoName(OpType op) {
    return std::string(OpTypeName(op)) + ".noname." +
           std::to_string(auto_name_counter_[static_cast<int>(op)]++);
  }

  Status Validate(OpType op, const TensorView& t, const CollectiveArgs& args,
                  const std::vector<int>& members, Request* r) {
    // Built only for an error: this runs for every tensor enqueued.
    auto where = [&] {
      return " (rank " + std::to_string(job_.rank) + ", tensor '" + r->name +
             "')";
    };
    if (t.device != -1)
      return Status::InvalidArgument(
          "only CPU tensors are supported by this build" + where());
    for (int64_t d : t.shape)
      if (d < 0) return Status::InvalidArgument("negative dimension" + where());
    if (t.data == nullptr && t.NumElements() > 0)
      return Status::InvalidArgument("tensor has no data" + where());
    if (t.input != nullptr && op != OpType::kAllreduce)
      return Status::InvalidArgument(
          std::string("a separate input tensor is supported by allreduce "
                      "only, not ") +
          OpTypeName(op) + where());
    const bool reduces =
        op == OpType::kAllreduce || op == OpType::kReducescatter;
    if (reduces && args.op == ReduceOp::kAdasum) {
      if (op != OpType::kAllreduce)
        return Status::InvalidArgument(
            "op=Adasum supports allreduce only, not reducescatter" + where());
      if (!AdasumSupports(t.dtype))
        return Status::InvalidArgument(
            std::string("op=Adasum needs float16, bfloat16, float32 or "
                        "float64 tensors, not ") +
            DataTypeName(t.dtype) + where());
      const size_t n = members.size();
      if ((n & (n - 1)) != 0)
        return Status::InvalidArgument(
            "op=Adasum needs a power-of-two number of ranks; the process set "
            "has " +
            std::to_string(n) + where());
    }
    if (t.dtype == DataType::kBool &&
        (op == OpType::kReducescatter ||
         (op == OpType::kAllreduce && args.op == ReduceOp::kAverage)))
      return Status::InvalidArgument(
          std::string("bool tensors support allreduce with Sum, Min, Max or "
                      "Product, allgather, broadcast and alltoall; not ") +
          (op == OpType::kReducescatter ? "reducescatter" : "Average") +
          where());
    if (reduces && (args.prescale != 1.0 || args.postscale != 1.0) &&
        t.dtype == DataType::kBool)
      return Status::InvalidArgument("bool tensors cannot be scaled" + where());
    if (op == OpType::kBroadcast &&
        std::find(members.begin(), members.end(), args.root) == members.end())
      return Status::InvalidArgument(
          "broadcast root rank " + std::to_string(args.root) +
          " is out of range for a process set of ranks " +
          ShapeString(std::vector<int64_t>(members.begin(), members.end())) +
          where());
    if ((op == OpType::kAllgather || op == OpType::kAlltoall) &&
        t.shape.empty())
      return Status::InvalidArgument(std::string(OpTypeName(op)) +
                                     " needs a tensor of at least one "
                                     "dimension" +
                                     where());
    if (op == OpType::kAlltoall) {
      const int64_t n = static_cast<int64_t>(members.size());
      if (args.splits.empty()) {
        if (t.shape[0] % n != 0)
          return Status::InvalidArgument(
              "alltoall without splits needs dim 0 (" +
              std::to_string(t.shape[0]) +
              ") divisible by the number of "
              "ranks (" +
              std::to_string(n) + ")" + where());
        r->splits.assign(n, t.shape[0] / n);
      } else {
        if (static_cast<int64_t>(args.splits.size()) != n)
          return Status::InvalidArgument(
              "alltoall splits have " + std::to_string(args.splits.size()) +
              " entries but the process set has " + std::to_string(n) +
              " ranks" + where());
        int64_t sum = 0;
        for (int64_t s : args.splits) {
          if (s < 0)
            return Status::InvalidArgument("negative alltoall split" + where());
          sum += s;
        }
        if (sum != t.shape[0])
          return Status::InvalidArgument(
              "alltoall splits sum to " + std::to_string(sum) +
              " but dim 0 is " + std::to_string(t.shape[0]) + where());
        r->splits = args.splits;
      }
    }
    return Status::OK();
  }

  // Ranks on our host (equal host keys) share memory unless disabled.
  // Waiters spin before they sleep even when ranks outnumber cores: spinners
  // yield the core every few microseconds, so the rank they wait for still
  // runs, and a futex wake-up costs far more than that (np=4 on 2 cores:
  // 4 B allreduce ~90 µs sleeping at once, ~15 µs spinning).
  // The executor makes groups for smaller member lists (process sets) the
  // same way.
  Status JoinSharedMemory(TcpTransport* tcp,
                          const std::vector<std::string>& hosts) {
    if (knobs_.shm_disable) return Status::OK();
    ShmConfig config;
    config.region_bytes = static_cast<size_t>(knobs_.shm_buffer_bytes);
    config.timeout_s = knobs_.operation_timeout_s;
    config.spin_us = knobs_.spin_time_us;
    make_shm_ = [tcp, config, size = job_.size, me = job_.rank](
                    const std::vector<int>& members,
                    std::unique_ptr<ShmGroup>* out) {
      // Each peer's TCP link tells when it dies while we wait on it.
      std::vector<int> fds(size, -1);
      for (int r : members)
        if (r != me) fds[r] = tcp->PeerFd(r);
      return ShmGroup::Create(tcp, members, fds, config, out);
    };
    std::vector<int> local;
    for (int r = 0; r < job_.size; ++r)
      if (hosts[r] == hosts[job_.rank]) local.push_back(r);
    if (local.size() < 2) return Status::OK();
    loop_spin_ = AdaptiveSpin(config.spin_us);
    return make_shm_(local, &shm_);
  }

  // With every rank on this host in the shared-memory group, coordination
  // frames travel through it too and the loop sleeps on its doorbell, which
  // enqueues and incoming frames ring; otherwise the loop polls sockets and
  // the queue's eventfd.
  void UseControlLinks(std::vector<Socket> sockets) {
    const bool shm = shm_ != nullptr && shm_->size() == job_.size;
    for (size_t r = 0; r < sockets.size(); ++r) {
      if (shm && sockets[r].valid())
        control_.push_back(std::make_unique<ShmLink>(
            shm_.get(), job_.rank == 0 ? static_cast<int>(r) : 0,
            std::move(sockets[r])));
      else
        control_.push_back(std::make_unique<SocketLink>(std::move(sockets[r])));
    }
    if (shm) {
      bell_ = shm_->doorbell(shm_->index());
      queue_.SetWakeHook([bell = bell_] { bell->Ring(); });
    }
  }

  // Sleeps until an enqueue or a control frame may be waiting, or until
  // timeout_ms; afterwards HasData() tells which links have something.
  void AwaitEvent(int timeout_ms) {
    for (auto& link : control_) link->Flush();
    if (bell_ != nullptr) {
      // A ring announces bytes, not frames: frames still waiting in a ring
      // after the last pass will not ring again.
      for (auto& link : control_)
        if (link->valid() && link->HasData()) timeout_ms = 0;
      const auto start = std::chrono::steady_clock::now();
      if (!bell_->Wait(bell_seen_, loop_spin_.spin_us(), timeout_ms))
        for (auto& link : control_)
          if (link->valid()) link->Probe();
      if (timeout_ms > 0) loop_spin_.RecordSince(start);
      bell_seen_ = bell_->Read();  // before looking: later rings wake us
      return;
    }
    pollfds_.assign(1, pollfd{queue_.wake_fd(), POLLIN, 0});
    for (auto& link : control_) pollfds_.push_back({link->fd(), POLLIN, 0});
    poll(pollfds_.data(), pollfds_.size(), timeout_ms);
    if (pollfds_[0].revents) queue_.DrainWake();
    for (size_t i = 0; i < control_.size(); ++i)
      if (pollfds_[i + 1].revents) control_[i]->MarkReadable();
  }

  // --- background loop -----------------------------------------------------

  // The loop thread: drives whenever no waiting caller does.
  void Loop() {
    while (!loop_done_.load()) {
      if (!MayDrive()) continue;
      std::unique_lock<std::mutex> drive(drive_mu_);
      while (!loop_done_.load() && callers_.load() == 0) RunStep(1000);
    }
  }

  // Parks the loop thread while callers drive and for kParkGrace after;
  // false: ask again.
  bool MayDrive() {
    std::unique_lock<std::mutex> lock(park_mu_);
    auto quiet_since = Clock::time_point(Clock::duration(last_drive_end_));
    if (callers_.load() == 0 && (Clock::now() - quiet_since >= kParkGrace ||
                                 shutdown_requested_.load()))
      return true;
    parked_.store(true);
    park_cv_.wait_for(lock, kParkGrace);
    parked_.store(false);
    return false;
  }

  // A waiting caller's turn (DriveGate): run steps until `h` is done. When
  // another caller drives, that one may complete `h`; look again shortly.
  void DriveUntil(HandleState& h, Clock::time_point until) {
    callers_.fetch_add(1);
    // Ends the loop thread's wait so it lets go of drive_mu_.
    if (!parked_.load()) queue_.Wake();
    while (!h.Done() && !loop_done_.load() && Clock::now() < until) {
      std::unique_lock<std::mutex> drive(drive_mu_, std::try_to_lock);
      if (!drive.owns_lock()) {
        // The loop thread lets go at the end of its step; another waiter
        // once its own handle is done, and it may complete ours meanwhile.
        std::unique_lock<std::mutex> lock(h.mu);
        h.cv.wait_for(lock, kDriveRetry, [&h] { return h.done; });
        continue;
      }
      while (!h.Done() && !loop_done_.load()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        until - Clock::now())
                        .count();
        if (left < 0) break;
        RunStep(static_cast<int>(std::min<int64_t>(1000, left + 1)));
      }
    }
    last_drive_end_.store(Clock::now().time_since_epoch().count());
    callers_.fetch_sub(1);
  }

  // One step with drive_mu_ held; ends the loop when the job is over or
  // failed.
  void RunStep(int max_wait_ms) {
    bool finished = false;
    Status st = job_.rank == 0 ? CoordinatorStep(max_wait_ms, &finished)
                               : WorkerStep(max_wait_ms, &finished);
    if (st.ok() && !finished) return;
    if (!st.ok()) Fatal(st.message());
    // Transfers that broke as the job shut down, and operations it will
    // never run (another rank shut it down), still owe their callers an
    // answer.
    executor_->FailBroken(Status::Aborted(ShutdownMessage()));
    queue_.FailAll(Status::Aborted(ShutdownMessage()));
    loop_done_.store(true);
    park_cv_.notify_all();
  }

  // A collective failing on a broken link says only which neighbour this
  // rank lost; the control plane usually knows which rank actually died.
  // Rank 0 looks for a worker whose control link dropped or that reported a
  // failure; a worker asks what rank 0 said last.
  Status RootCause(const Status& st) {
    if (job_.size == 1) return st;
    if (job_.rank != 0) return FromCoordinator(st, false);
    Deadline deadline = Deadline::After(1.0);
    for (size_t r = 1; r < control_.size(); ++r) {
      std::string frame;
      while (!deadline.Expired()) {
        control_[r]->Probe();
        if (!control_[r]->HasData()) break;
        if (!control_[r]->ReadFrame(kMaxControlFrame, deadline, &frame).ok())
          return Disconnected(static_cast<int>(r), st);
        RequestList l;
        if (DecodeRequestList(frame, job_.size, &l).ok() &&
            !l.abort_reason.empty())
          return Status::Aborted("rank " + std::to_string(r) +
                                 " failed: " + l.abort_reason);
      }
    }
    return st;
  }

  // A worker's link to rank 0 broke, or one of its transfers did. Read what
  // rank 0 sent before closing: a shutdown (a clean exit) or the reason the
  // job failed (rank 0 hears from every rank, so it names the root cause).
  // Without either, `fallback` stands, with what rank 0's silence says: a
  // closed link means rank 0 died; an open but silent one that it may be the
  // rank that hung (a transfer times out on the neighbour first, even when
  // the neighbour only waits on the hung rank like everyone else).
  Status FromCoordinator(const Status& fallback, bool about_rank0) {
    Deadline deadline = Deadline::After(1.0);
    std::string frame;
    Status st;
    while ((st = control_[0]->ReadFrame(kMaxControlFrame, deadline, &frame))
               .ok()) {
      if (frame.empty()) continue;  // a heartbeat
      ResponseList l;
      if (!DecodeResponseList(frame, job_.size, &cache_, &l).ok()) break;
      if (!l.abort_reason.empty()) return Status::Aborted(l.abort_reason);
      if (l.shutdown) return Status::OK();
    }
    if (about_rank0 || st.ok()) return fallback;
    if (st.code() == StatusCode::kTimeout)
      return Status::Aborted(fallback.message() +
                             "; rank 0 did not answer within 1 s either");
    return Status::Aborted("lost connection to rank 0; it probably died (" +
                           fallback.message() + ")");
  }

  // Rank 0 lost its link to worker `r`.
  static Status Disconnected(int r, const Status& cause) {
    return Status::Aborted("rank " + std::to_string(r) + " disconnected (" +
                           cause.message() + "); it probably died");
  }

  Status LostCoordinator(const Status& cause) {
    return FromCoordinator(
        Status::Aborted("lost connection to rank 0 (" + cause.message() +
                        "); it probably died"),
        true);
  }

  // Rank 0: a tick on each tensor's negotiation for the rank that sent it.
  void TickNegotiation(int rank, const RequestList& list) {
    if (!timeline_.active()) return;
    for (const Request& r : list.requests)
      timeline_.NegotiateTick(r.name, UpperOpName(r.op), rank);
    for (uint32_t slot : list.cache_hits) {
      if (!cache_.Has(slot)) continue;
      const Response& c = cache_.Get(slot);
      timeline_.NegotiateTick(c.names[0], UpperOpName(c.op), rank);
    }
  }

  RequestList CollectRequests() {
    RequestList list;
    list.epoch = epoch_;
    for (Request& r : queue_.TakeNew()) {
      int slot = job_.rank == 0 ? -1 : cache_.Find(r);
      if (slot >= 0) {
        list.cache_hits.push_back(static_cast<uint32_t>(slot));
        hit_keys_[static_cast<uint32_t>(slot)] = r.Key();
      } else {
        list.requests.push_back(std::move(r));
      }
    }
    if (shutdown_requested_.load() && !shutdown_sent_) {
      list.shutdown = true;
      shutdown_sent_ = true;
    }
    TakeWaiting(&list, Clock::now());
    return list;
  }

  static bool Empty(const RequestList& l) {
    return l.requests.empty() && l.cache_hits.empty() && !l.shutdown &&
           !l.waiting_update;
  }

  // The calling thread submits to this engine (see ThreadCensus).
  void CountSubmitter() {
    if (tls_census.census == census_) return;
    if (tls_census.census) tls_census.census->live.fetch_sub(1);
    tls_census.census = census_;
    census_->live.fetch_add(1);
  }

  // A thread of this rank begins or ends waiting on an operation. Cheap:
  // a synchronous collective calls it twice.
  void OnWait(const HandleState& h, bool begin) {
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
        Blocked() ? (Clock::now() + kWaitReportAfter).time_since_epoch().count()
                  : kNever);
  }

  // True while every thread that has submitted to this rank waits (see
  // ThreadCensus). Called with waiting_mu_ held.
  bool Blocked() const {
    const int live = census_->live.load();
    return live > 0 && census_->waiting.load() >= live && !waiters_.empty();
  }

  // What this rank waits on, for rank 0's deadlock check: the keys once
  // the rank has stayed blocked, waiting on the same operations, for
  // kWaitReportAfter (synchronous collectives that finish sooner cost
  // rank 0 nothing, and this rank an atomic load per step); an empty list,
  // riding on other news, once that wait has ended.
  void TakeWaiting(RequestList* list, Clock::time_point now) {
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

  // Milliseconds until TakeWaiting will have a wait to report.
  int WaitReportDueMs(Clock::time_point now) const {
    const int64_t due = report_due_.load();
    if (due == kNever) return 1000;
    const auto left = Clock::duration(due) - now.time_since_epoch();
    return static_cast<int>(std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1,
        0, 1000));
  }

  // Rank 0's step; *finished once the job shut down.
  Status CoordinatorStep(int max_wait_ms, bool* finished) {
    const int n = job_.size;
    auto now = Clock::now();
    int timeout = max_wait_ms;
    auto wake = coordinator_->NextWake(now);
    if (wake != Clock::time_point::max())
      timeout = static_cast<int>(std::min<int64_t>(
          max_wait_ms,
          std::chrono::duration_cast<std::chrono::milliseconds>(wake - now)
                  .count() +
              1));
    if (coordinator_->ShouldEmit(now)) timeout = 0;
    AwaitEvent(
        std::min({timeout, liveness_->WaitMs(now), WaitReportDueMs(now)}));
    timeline_.MarkCycleStart();
    now = Clock::now();
    RequestList mine = CollectRequests();
    if (!Empty(mine)) {
      TickNegotiation(0, mine);
      coordinator_->AddRequestList(0, mine, now);
    }
    for (int r = 1; r < n; ++r) {
      if (!control_[r]->HasData()) continue;
      std::string frame;
      Status st = control_[r]->ReadFrame(
          kMaxControlFrame, Deadline::After(knobs_.operation_timeout_s),
          &frame);
      if (!st.ok()) return Disconnected(r, st);
      liveness_->Heard(r - 1, now);
      if (frame.empty()) continue;  // a heartbeat
      RequestList list;
      HVD_RETURN_IF_ERROR(DecodeRequestList(frame, n, &list));
      if (!list.abort_reason.empty())
        return Status::Aborted("rank " + std::to_string(r) +
                               " failed: " + list.abort_reason);
      TickNegotiation(r, list);
      coordinator_->AddRequestList(r, list, now);
    }
    for (const std::string& w : coordinator_->TakeStallWarnings(now))
      HVD_LOG(kWarning, w);
    if (!coordinator_->ShouldEmit(now)) return CheckLiveness(now);
    ResponseList out = coordinator_->TakeResponses(now);
    out.small_allreduce_bytes = tuned_small_allreduce_bytes_;
    tuned_small_allreduce_bytes_ = -1;
    if (timeline_.active())
      for (const Response& r : out.responses)
        for (const std::string& name : r.names)
          timeline_.OpStart(name, UpperOpName(r.op));
    std::string frame = EncodeResponseList(out, &cache_);
    // Every worker must have the whole list before we wait for it inside
    // a collective.
    for (int r = 1; r < n; ++r) {
      Status st = control_[r]->WriteFrame(
          frame, Deadline::After(knobs_.operation_timeout_s));
      if (!st.ok()) return Disconnected(r, st);
    }
    liveness_->Sent(now);
    for (int r = 1; r < n; ++r) {
      Status st =
          control_[r]->Drain(Deadline::After(knobs_.operation_timeout_s));
      if (!st.ok()) return Disconnected(r, st);
    }
    Status st = ExecuteList(out);
    if (!st.ok()) return RootCause(st);
    *finished = out.shutdown;
    if (tuner_ != nullptr && !out.shutdown) Tune(out);
    return out.shutdown ? Status::OK() : CheckLiveness(Clock::now());
  }

  // Rank 0: feeds the tuner what a list moved; its new choice governs the
  // coordinator at once and every rank's executor from the next list.
  void Tune(const ResponseList& list) {
    int64_t bytes = 0;
    for (const Response& r : list.responses) {
      if (r.error || r.op > static_cast<uint8_t>(OpType::kReducescatter))
        continue;
      for (const auto& shape : r.shapes) {
        int64_t n = static_cast<int64_t>(DataTypeSize(r.dtype));
        for (int64_t d : shape) n *= d;
        bytes += n;
      }
    }
    if (!tuner_->Record(bytes, Clock::now())) return;
    const TunedParams& p = tuner_->params();
    coordinator_->SetTuning(p.fusion_threshold, p.cycle_time_ms / 1000.0);
    tuned_small_allreduce_bytes_ = p.small_allreduce_bytes;
  }

  // A worker's step; *finished once the job shut down.
  Status WorkerStep(int max_wait_ms, bool* finished) {
    ControlLink& ctl = *control_[0];
    const auto before = Clock::now();
    AwaitEvent(std::min(
        {max_wait_ms, liveness_->WaitMs(before), WaitReportDueMs(before)}));
    const auto now = Clock::now();
    RequestList mine = CollectRequests();
    Status st;
    if (!Empty(mine)) {
      st = ctl.WriteFrame(EncodeRequestList(mine),
                          Deadline::After(knobs_.operation_timeout_s));
      liveness_->Sent(now);
    }
    if (!st.ok()) return LostCoordinator(st);
    std::string frame;
    while (frame.empty() && ctl.HasData()) {  // empty frames are heartbeats
      st = ctl.ReadFrame(kMaxControlFrame,
                         Deadline::After(knobs_.operation_timeout_s), &frame);
      if (!st.ok()) return LostCoordinator(st);
      liveness_->Heard(0, now);
    }
    if (frame.empty()) return CheckLiveness(now);
    ResponseList list;
    HVD_RETURN_IF_ERROR(DecodeResponseList(frame, job_.size, &cache_, &list));
    if (!list.abort_reason.empty()) return Status::Aborted(list.abort_reason);
    st = ExecuteList(list);
    if (!st.ok()) return RootCause(st);
    *finished = list.shutdown;
    return Status::OK();
  }

  // Sends heartbeats that are due, and fails the job when a peer has been
  // silent past the operation timeout (see PeerLiveness).
  Status CheckLiveness(Clock::time_point now) {
    int link = liveness_->Silent(now);
    if (link >= 0) {
      const int peer = job_.rank == 0 ? link + 1 : 0;
      char took[32];
      std::snprintf(took, sizeof(took), "%.1f",
                    liveness_->SilentFor(link, now));
      return Status::Aborted(
          "rank " + std::to_string(peer) + " sent nothing for " + took +
          " s (HOROVOD_OPERATION_TIMEOUT_SECONDS); it is hung or its "
          "connection is blackholed");
    }
    // A busy shared-memory link never idles long enough to look at its
    // socket; this way a hang-up there is noticed within a heartbeat.
    if (liveness_->ProbeDue(now)) {
      for (auto& link : control_)
        if (link->valid()) link->Probe();
      liveness_->Probed(now);
    }
    if (!liveness_->HeartbeatDue(now)) return Status::OK();
    for (size_t r = 0; r < control_.size(); ++r) {
      if (!control_[r]->valid()) continue;
      Status st = control_[r]->WriteFrame(
          std::string(), Deadline::After(knobs_.operation_timeout_s));
      if (!st.ok())
        return job_.rank == 0 ? Disconnected(static_cast<int>(r), st)
                              : LostCoordinator(st);
    }
    liveness_->Sent(now);
    return Status::OK();
  }

  Status ExecuteList(const ResponseList& list) {
    const auto start = Clock::now();
    ++epoch_;
    if (list.small_allreduce_bytes >= 0)
      executor_->SetSmallAllreduceBytes(list.small_allreduce_bytes);
    for (const Response& r : list.responses) {
      Status st = executor_->Execute(r);
      if (timeline_.active())
        for (const std::string& name : r.names) timeline_.OpEnd(name);
      HVD_RETURN_IF_ERROR(st);
      // Every rank applies the same Puts in the same order: caches agree.
      if (ResponseCache::Cacheable(r))
        for (size_t i = 0; i < r.names.size(); ++i) cache_.Put(r, i, epoch_);
    }
    // Hits the coordinator could not trust go again in full.
    std::vector<Request> resend;
    for (auto& s : list.stale_hits) {
      if (s.first != job_.rank) continue;
      auto it = hit_keys_.find(s.second);
      Request r;
      if (it != hit_keys_.end() && queue_.Find(it->second, &r))
        resend.push_back(r);
    }
    if (!resend.empty()) {
      RequestList l;
      l.epoch = epoch_;
      l.requests = resend;
      HVD_RETURN_IF_ERROR(control_[0]->WriteFrame(
          EncodeRequestList(l), Deadline::After(knobs_.operation_timeout_s)));
    }
    const auto end = Clock::now();
    liveness_->Busy(end - start, end);
    return Status::OK();
  }

  // The job cannot continue: tell the peers why (best effort), break every
  // link so they notice at once, and fail every pending operation.
  void Fatal(const std::string& reason) {
    std::string text = "rank " + std::to_string(job_.rank) + ": " + reason;
    HVD_LOG(kError, text);
    if (job_.size > 1) {
      if (job_.rank == 0) {
        ResponseList l;
        l.abort_reason = reason;
        std::string frame = EncodeResponseList(l, nullptr);
        for (size_t r = 1; r < control_.size(); ++r)
          if (control_[r]->valid() &&
              control_[r]->WriteFrame(frame, Deadline::After(0.5)).ok())
            (void)control_[r]->Drain(Deadline::After(0.5));
      } else if (!control_.empty() && control_[0]->valid()) {
        RequestList l;
        l.abort_reason = reason;
        if (control_[0]
                ->WriteFrame(EncodeRequestList(l), Deadline::After(0.5))
                .ok())
          (void)control_[0]->Drain(Deadline::After(0.5));
      }
      if (shm_) shm_->Abort(reason);
      if (executor_) executor_->Abort(reason);
      transport_->Abort(reason);
      for (auto& link : control_) link->Close();
    }
    queue_.FailAll(Status::Aborted(text));
    executor_->FailBroken(Status::Aborted(text));
  }

  JobInfo job_;
  Knobs knobs_;
  ResponseCache cache_;
  ProcessSetTable sets_;
  TensorQueue queue_;
  std::unique_ptr<LoopbackFabric> fabric_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<ShmGroup> shm_;  // every rank on this host
  ShmGroupFactory make_shm_;       // empty without shared memory
  AdaptiveSpin loop_spin_;  // waits for work on the shared-memory doorbell
  std::vector<std::unique_ptr<ControlLink>> control_;
  Doorbell* bell_ = nullptr;  // set when control frames go through shm_
  uint32_t bell_seen_ = 0;
  std::vector<pollfd> pollfds_;
  std::unique_ptr<PeerLiveness> liveness_;
  std::unique_ptr<Coordinator> coordinator_;
  Timeline timeline_;
  std::unique_ptr<Autotuner> tuner_;          // rank 0 with HOROVOD_AUTOTUNE
  int64_t tuned_small_allreduce_bytes_ = -1;  // for the next response list
  std::unique_ptr<Executor> executor_;
  std::thread thread_;
  std::shared_ptr<DriveGate> gate_;
  std::mutex waiting_mu_;
  std::vector<const HandleState*> waiters_;  // what threads wait on now
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  // Clock ticks at which the current waits become worth reporting.
  std::atomic<int64_t> report_due_{kNever};
  std::atomic<uint64_t> episode_{0};  // begins and ends of waits so far
  // Used by the thread running steps only:
  uint64_t reported_episode_ = 0;  // episode_ when rank 0 last heard
  bool rank0_has_waits_ = false;   // rank 0 holds a non-empty list
  std::shared_ptr<ThreadCensus> census_ = std::make_shared<ThreadCensus>();
  std::mutex drive_mu_;                     // held by whoever runs steps
  std::atomic<int> callers_{0};             // waiters driving or about to
  std::atomic<int64_t> last_drive_end_{0};  // steady clock ticks
  std::mutex park_mu_;
  std::condition_variable park_cv_;
  std::atomic<bool> parked_{false};
  std::atomic<bool> shutdown_requested_{false};
  std::atomic<bool> loop_done_{false};
  bool shutdown_sent_ = false;
  uint64_t epoch_ = 0;
  std::unordered_map<uint32_t, std::string> hit_keys_;
  std::atomic<uint64_t> auto_name_counter_[8] = {};
};

// --- public API ------------------------------------------------------------

Engine::Engine(std::unique_ptr<EngineImpl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() { impl_->Shutdown(); }

Status Engine::Start(const JobInfo& job, std::unique_ptr<Engine>* out) {
  return Start(job, Knobs::FromEnvironment(), out);
}

Status Engine::Start(const JobInfo& job, const Knobs& knobs,
                     std::unique_ptr<Engine>* out) {
  if (knobs.keep_freed_memory && !KeepFreedMemory())
    HVD_LOG(kDebug,
            "HOROVOD_KEEP_FREED_MEMORY: the C library does not "
            "support it (not glibc)");
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

namespace {
Status One(Status st, std::vector<Handle>& hs, Handle* h) {
  if (st.ok()) *h = hs[0];
  return st;
}
}  // namespace

Status Engine::Allreduce(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  std::vector<Handle> hs;
  return One(impl_->Enqueue(OpType::kAllreduce, {t}, a, &hs), hs, h);
}
Status Engine::GroupedAllreduce(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return impl_->Enqueue(OpType::kAllreduce, ts, a, hs);
}
Status Engine::Allgather(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  std::vector<Handle> hs;
  return One(impl_->Enqueue(OpType::kAllgather, {t}, a, &hs), hs, h);
}
Status Engine::GroupedAllgather(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return impl_->Enqueue(OpType::kAllgather, ts, a, hs);
}
Status Engine::Broadcast(const TensorView& t, const CollectiveArgs& a,
                         Handle* h) {
  std::vector<Handle> hs;
  return One(impl_->Enqueue(OpType::kBroadcast, {t}, a, &hs), hs, h);
}
void Engine::LeaveCensus() { impl_->LeaveCensus(); }
Status Engine::GroupedBroadcast(const std::vector<TensorView>& ts,
                                const CollectiveArgs& a,
                                std::vector<Handle>* hs) {
  return impl_->Enqueue(OpType::kBroadcast, ts, a, hs);
}
Status Engine::Alltoall(const TensorView& t, const CollectiveArgs& a,
                        Handle* h) {
  std::vector<Handle> hs;
  return One(impl_->Enqueue(OpType::kAlltoall, {t}, a, &hs), hs, h);
}
Status Engine::Reducescatter(const TensorView& t, const CollectiveArgs& a,
                             Handle* h) {
  std::vector<Handle> hs;
  return One(impl_->Enqueue(OpType::kReducescatter, {t}, a, &hs), hs, h);
}
Status Engine::GroupedReducescatter(const std::vector<TensorView>& ts,
                                    const CollectiveArgs& a,
                                    std::vector<Handle>* hs) {
  return impl_->Enqueue(OpType::kReducescatter, ts, a, hs);
}
Status Engine::Enqueue(OpType op, const std::vector<TensorView>& ts,
                       const CollectiveArgs& a, std::vector<Handle>* hs) {
  switch (op) {
    case OpType::kAllreduce:
    case OpType::kAllgather:
    case OpType::kBroadcast:
    case OpType::kReducescatter:
      return impl_->Enqueue(op, ts, a, hs);
    case OpType::kAlltoall:
      if (ts.size() != 1)
        return Status::InvalidArgument("alltoall takes one tensor, got " +
                                       std::to_string(ts.size()) + " (rank " +
                                       std::to_string(rank()) + ")");
      return impl_->Enqueue(op, ts, a, hs);
    default:
      return Status::InvalidArgument(
          std::string("Engine::Enqueue cannot start ") + OpTypeName(op) +
          "; call it directly (rank " + std::to_string(rank()) + ")");
  }
}

Status Engine::Barrier(int process_set) {
  Handle h;
  HVD_RETURN_IF_ERROR(
      impl_->EnqueueControl(static_cast<uint8_t>(OpType::kBarrier),
                            "__barrier__", {}, 0, process_set, &h));
  return h.Wait();
}

Status Engine::Join(int* last_joined_rank) {
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(static_cast<uint8_t>(OpType::kJoin),
                                            kJoinTensorName, {}, 0, 0, &h));
  HVD_RETURN_IF_ERROR(h.Wait());
  *last_joined_rank = h.join_result();
  return Status::OK();
}

Status Engine::AddProcessSet(const std::vector<int>& ranks, int* id) {
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() ||
      std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end() ||
      sorted.front() < 0 || sorted.back() >= size())
    return Status::InvalidArgument(
        "invalid process set ranks " +
        ShapeString(std::vector<int64_t>(ranks.begin(), ranks.end())) +
        " for a job of size " + std::to_string(size()));
  Handle h;
  HVD_RETURN_IF_ERROR(impl_->EnqueueControl(
      static_cast<uint8_t>(ControlOp::kAddProcessSet), "__add_process_set__",
      std::vector<int64_t>(sorted.begin(), sorted.end()), 0, 0, &h));
  HVD_RETURN_IF_ERROR(h.Wait());
  *id = h.join_result();
  return Status::OK();
}

Status Engine::RemoveProcessSet(int id) {
  Handle h;
  HVD_RETURN_IF_ERROR(
      impl_->EnqueueControl(static_cast<uint8_t>(ControlOp::kRemoveProcessSet),
                            "__remove_process_set__", {}, id, 0, &h));
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

Status Engine::Shutdown() { return impl_->Shutdown(); }

}  // namespace horovod
