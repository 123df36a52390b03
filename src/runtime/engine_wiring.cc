// EngineImpl, wiring: joining the job (transports, shared memory, control
// links, coordinator, autotuner, timeline, executor) and shutting down.
#include "runtime/engine_impl.h"

namespace horovod {

Status EngineImpl::Start() {
  if (knobs_.keep_freed_memory && !KeepFreedMemory())
    HVD_LOG(kDebug,
            "HOROVOD_KEEP_FREED_MEMORY: the C library does not "
            "support it (not glibc)");
  Mesh mesh;
  job_.settings = AgreedSettings(knobs_);
  HVD_RETURN_IF_ERROR(EstablishMesh(job_, &mesh));
  if (mesh.hosts.size() == static_cast<size_t>(job_.size)) {
    const HostPlacement p = PlaceByHostKeys(mesh.hosts, job_.rank);
    job_.cross_rank = p.cross_rank;
    job_.cross_size = p.cross_size;
    job_.homogeneous = p.homogeneous;
  }
  if (job_.size == 1) {
    fabric_ = std::make_unique<LoopbackFabric>(1);
    transport_ = std::make_unique<LoopbackTransport>(fabric_.get(), 0);
  } else {
    auto tcp = std::make_unique<TcpTransport>(job_.rank, std::move(mesh.data),
                                              knobs_.operation_timeout_s,
                                              knobs_.data_mac);
    HVD_RETURN_IF_ERROR(JoinSharedMemory(tcp.get(), mesh.hosts));
    transport_ = std::move(tcp);
  }
  UseControlLinks(std::move(mesh.control));
  liveness_ =
      std::make_unique<PeerLiveness>(job_.rank == 0 ? job_.size - 1 : 1,
                                     knobs_.operation_timeout_s, Clock::now());
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
      [this](const HandleState& h, bool begin, DriveGate::TimePoint now) {
        OnWait(h, begin, now);
      });
  queue_.SetGate(gate_);
  thread_ = std::thread([this] { Loop(); });
  return Status::OK();
}

Status EngineImpl::StartTimeline(const std::string& path, bool mark_cycles) {
  if (job_.rank != 0) return Status::OK();
  return timeline_.Start(path, mark_cycles);
}

Status EngineImpl::Shutdown() {
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

Status EngineImpl::JoinSharedMemory(TcpTransport* tcp,
                                    const std::vector<std::string>& hosts) {
  if (knobs_.shm_disable) return Status::OK();
  ShmConfig config;
  config.region_bytes = static_cast<size_t>(knobs_.shm_buffer_bytes);
  config.timeout_s = knobs_.operation_timeout_s;
  config.spin_us = knobs_.spin_time_us;
  auto create = [tcp, size = job_.size, me = job_.rank](
                    const std::vector<int>& members, const ShmConfig& config,
                    std::unique_ptr<ShmGroup>* out) {
    // Each peer's TCP link tells when it dies while we wait on it.
    std::vector<int> fds(size, -1);
    for (int r : members)
      if (r != me) fds[r] = tcp->PeerFd(r);
    return ShmGroup::Create(tcp, members, fds, config, out);
  };
  make_shm_ = [create, config](const std::vector<int>& members,
                               std::unique_ptr<ShmGroup>* out) {
    return create(members, config, out);
  };
  std::vector<int> local;
  for (int r = 0; r < job_.size; ++r)
    if (hosts[r] == hosts[job_.rank]) local.push_back(r);
  if (local.size() < 2) return Status::OK();
  loop_spin_ = AdaptiveSpin(config.spin_us);
  // Only the group of every rank on the host carries the ready board, and
  // only when the knobs allow one; a rank whose knobs say otherwise makes
  // the segments' headers disagree, and the ranks fall back to TCP
  // together instead of waiting on a board that one of them never reads.
  ShmConfig with_board = config;
  if (BoardAllowed()) with_board.board_bytes = ReadyBoard::AreaBytes();
  return create(local, with_board, &shm_);
}

void EngineImpl::UseControlLinks(std::vector<Socket> sockets) {
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
    queue_.SetWakeHook([bell = bell_] { bell->RingLocal(); });
  }
  UseBoard();
}

}  // namespace horovod
