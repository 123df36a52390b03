// EngineImpl, the loop driver: the loop thread, waiting callers that drive
// steps themselves, and sleeping until work or a control frame arrives.
#include "runtime/engine_impl.h"
#include "transport/doorbell.h"

namespace horovod {

namespace {

double Seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

Clock::time_point EngineImpl::AwaitEvent(int timeout_ms,
                                         Clock::time_point begin) {
  const bool pending = queue_.Pending();
  const auto end = AwaitEventUntimed(timeout_ms, begin);
  (pending ? step_metrics_.negotiate_s : step_metrics_.idle_s) +=
      Seconds(end - begin);
  return end;
}

Clock::time_point EngineImpl::AwaitEventUntimed(int timeout_ms,
                                                Clock::time_point begin) {
  for (auto& link : control_) link->Flush();
  if (bell_ != nullptr) {
    // A ring announces bytes, not frames: frames still waiting in a ring
    // after the last pass will not ring again.
    for (auto& link : control_)
      if (link->valid() && link->HasData()) timeout_ms = 0;
    if (timeout_ms == 0) {  // work is waiting: no spin, no probes
      bell_seen_ = bell_->Read();
      return begin;  // no wait worth a clock read
    }
    bool quick = false;
    if (!bell_->Wait(
            bell_seen_, [this] { return BoardNews(); }, loop_spin_.spin_us(),
            timeout_ms, &quick))
      for (auto& link : control_)
        if (link->valid()) link->Probe();
    if (quick) {
      // Rung within the first polls: a wait that costs less than the
      // clock reads that would time it counts as none, and as short.
      if (timeout_ms > 0) loop_spin_.Record(0);
      bell_seen_ = bell_->Read();
      return begin;
    }
    const auto end = Clock::now();
    if (timeout_ms > 0)
      loop_spin_.Record(
          std::chrono::duration<double, std::micro>(end - begin).count());
    bell_seen_ = bell_->Read();  // before looking: later rings wake us
    return end;
  }
  // An enqueue since our last look skips the sleep (it wrote no eventfd).
  if (timeout_ms != 0 && !queue_.BeginSleep(wakes_seen_)) timeout_ms = 0;
  pollfds_.assign(1, pollfd{queue_.wake_fd(), POLLIN, 0});
  for (auto& link : control_) pollfds_.push_back({link->fd(), POLLIN, 0});
  poll(pollfds_.data(), pollfds_.size(), timeout_ms);
  wakes_seen_ = queue_.EndSleep();  // before looking: later ones wake us
  if (pollfds_[0].revents) queue_.DrainWake();
  for (size_t i = 0; i < control_.size(); ++i)
    if (pollfds_[i + 1].revents) control_[i]->MarkReadable();
  return Clock::now();
}

void EngineImpl::Loop() {
  while (!loop_done_.load()) {
    if (!MayDrive()) continue;
    std::unique_lock<std::mutex> drive(drive_mu_);
    auto t = Clock::now();
    while (!loop_done_.load() && callers_.load() == 0) t = RunStep(1000, t);
  }
}

bool EngineImpl::MayDrive() {
  std::unique_lock<std::mutex> lock(park_mu_);
  // Drives end without reading the clock: the quiet is timed from when
  // this thread first saw the latest end, which it looks for at least once
  // a park.
  const auto now = Clock::now();
  const uint64_t ends = drive_ends_.load();
  if (ends != ends_seen_) {
    ends_seen_ = ends;
    ends_seen_at_ = now;
  }
  const auto quiet = now - ends_seen_at_;
  if (callers_.load() == 0) {
    if (shutdown_requested_.load()) return true;
    if (quiet >= kParkGrace) {
      const uint64_t adds = queue_.Adds();
      const bool burst = adds != adds_seen_;
      adds_seen_ = adds;
      if (!burst || quiet >= kBurstHold) return true;
    }
  }
  // No drive ended since the last park while callers drive: one is long.
  const bool long_drive = callers_.load() > 0 && ends == park_ends_seen_;
  park_ends_seen_ = ends;
  parked_.store(true);
  if (long_drive) {
    parked_for_callers_.store(true);
    park_cv_.wait_for(lock, kLongPark, [this] {
      return callers_.load() == 0 || shutdown_requested_.load() ||
             loop_done_.load();
    });
    parked_for_callers_.store(false);
  } else {
    park_cv_.wait_for(lock, kParkGrace);
  }
  parked_.store(false);
  return false;
}

void EngineImpl::DriveUntil(HandleState& h, Clock::time_point until) {
  callers_.fetch_add(1);
  // Ends the loop thread's wait so it lets go of drive_mu_.
  if (!parked_.load()) queue_.Wake();
  // The clock is read when something needs the time: a deadline, a full
  // step (once a step: each one's end is the next one's start), a retry.
  // Lean steps need none, so a synchronous collective they finish reads
  // none here. The wait's start is then the first reading, and a deadline
  // is held against the last one: late by the lean steps between two full
  // ones at most (kLeanSteps, each a round that completed).
  Clock::time_point t =
      until == Clock::time_point::max() ? kUnread : Clock::now();
  Clock::time_point start = t;
  auto read = [&] {
    t = Clock::now();
    if (start == kUnread) start = t;
  };
  bool noticed = false;
  auto notice = [&] {
    if (noticed || start == kUnread || t - start < kWaitNoticeAfter) return;
    OnWait(h, true, start);
    noticed = true;
  };
  while (!h.Done() && !loop_done_.load() && t < until) {
    notice();
    std::unique_lock<std::mutex> drive(drive_mu_, std::try_to_lock);
    if (!drive.owns_lock()) {
      // The loop thread lets go at the end of its step; another waiter
      // once its own handle is done, and it may complete ours meanwhile.
      h.Sleep(Clock::now() + kDriveRetry);
      read();
      continue;
    }
    while (!h.Done() && !loop_done_.load() && t < until) {
      notice();
      // A round our last step posted usually completes within a few
      // polls, and a step with only board work needs none of a full
      // step's waits and checks (one comes at least every kLeanSteps):
      // neither reads the clock.
      if (FinishRound() || CallerStep()) continue;
      if (t == kUnread) read();
      // Until the wait is noticed, steps wait briefly, so it is on time.
      const int64_t most = noticed ? 1000 : 1;
      const int64_t left =
          until == Clock::time_point::max()
              ? most
              : std::chrono::duration_cast<std::chrono::milliseconds>(until - t)
                        .count() +
                    1;
      t = RunStep(static_cast<int>(std::min<int64_t>(most, left)), t);
    }
  }
  if (noticed) OnWait(h, false, Clock::now());
  // For the loop thread's grace.
  drive_ends_.fetch_add(1, std::memory_order_relaxed);
  // The park's predicate reads callers_ under park_mu_, after the flag is
  // set: either it sees this decrement, or the flag is seen here and the
  // lock taken below waits until the loop thread sleeps.
  if (callers_.fetch_sub(1) == 1 && parked_for_callers_.load()) {
    { std::lock_guard<std::mutex> lock(park_mu_); }
    park_cv_.notify_all();
  }
}

Clock::time_point EngineImpl::RunStep(int max_wait_ms,
                                      Clock::time_point begin) {
  bool finished = false;
  Status st = job_.rank == 0 ? CoordinatorStep(max_wait_ms, begin, &finished)
                             : WorkerStep(max_wait_ms, begin, &finished);
  const auto end = Clock::now();
  AddStepMetrics(end - begin);
  lean_steps_ = 0;
  if (st.ok() && !finished && !shutdown_received_) return end;
  EndLoop(st);
  return end;
}

bool EngineImpl::FinishRound() {
  if (board_ == nullptr || !board_->open() ||
      !PollBriefly([this] { return board_->Readable(); }))
    return false;
  const Status st = BoardComplete();
  // The round's counts and the executor's timings go to the metrics now;
  // the time around them is not taken (no clock read).
  AddStepMetrics(Clock::duration::zero());
  if (!st.ok()) EndLoop(st);
  return true;
}

bool EngineImpl::CallerStep() {
  if (board_ == nullptr || board_->open() || lean_steps_ >= kLeanSteps ||
      timeline_.active())
    return false;
  for (auto& link : control_)
    if (link->valid() && link->HasData()) return false;
  ++lean_steps_;
  Clock::time_point now = kUnread;
  const RequestList mine = CollectRequests(now);
  // What goes to rank 0 carries a time (its stall checks, the liveness).
  if (!Empty(mine)) now = Clock::now();
  RequestList late;
  late.epoch = epoch_;
  Status st = SendOwn(mine, now);
  if (st.ok()) {
    // As the full steps do: rank 0 holds its emitting while its round is
    // open, so only a worker that sent it something joins at once.
    BoardPost(&late, now, job_.rank != 0 && !Empty(mine));
    if (now == kUnread && !Empty(late)) now = Clock::now();
    st = SendOwn(late, now);
  }
  // Rank 0's coordinator may have something to emit now; a worker's frame
  // wants flushing; with nothing posted, the caller waits on something
  // else: a full step's waits and checks are due.
  if (!Empty(mine) || !Empty(late) || !board_->open()) lean_steps_ = kLeanSteps;
  if (!st.ok()) {
    EndLoop(st);
    return true;
  }
  FinishRound();
  return true;
}

void EngineImpl::EndLoop(const Status& st) {
  if (!st.ok()) Fatal(st.message());
  // Transfers that broke as the job shut down, and operations it will
  // never run (another rank shut it down), still owe their callers an
  // answer.
  executor_->FailBroken(Status::Aborted(ShutdownMessage()));
  queue_.FailAll(Status::Aborted(ShutdownMessage()));
  loop_done_.store(true);
  park_cv_.notify_all();
}

void EngineImpl::AddStepMetrics(Clock::duration step) {
  EngineMetrics& s = step_metrics_;
  const ExecutorStats x = executor_->TakeStats();
  s.copy_s = x.copy_ns * 1e-9;
  s.transfer_s = x.transfer_ns * 1e-9;
  s.bookkeeping_s = std::max(
      0.0, Seconds(step) - s.idle_s - s.negotiate_s - s.copy_s - s.transfer_s);
  StepTotals& t = totals_;
  t.cycles.Add(s.cycles);
  t.idle_s.Add(s.idle_s);
  t.negotiate_s.Add(s.negotiate_s);
  t.bookkeeping_s.Add(s.bookkeeping_s);
  t.copy_s.Add(s.copy_s);
  t.transfer_s.Add(s.transfer_s);
  s = EngineMetrics();
}

EngineMetrics EngineImpl::Metrics() const {
  EngineMetrics m;
  const StepTotals& t = totals_;
  m.cycles = t.cycles.Get();
  m.idle_s = t.idle_s.Get();
  m.negotiate_s = t.negotiate_s.Get();
  m.bookkeeping_s = t.bookkeeping_s.Get();
  m.copy_s = t.copy_s.Get();
  m.transfer_s = t.transfer_s.Get();
  if (executor_ != nullptr) {
    const ExecutorWork w = executor_->Work();
    m.responses = w.responses;
    m.tensors = w.tensors;
    m.bytes = w.bytes;
  }
  m.cache_hits = cache_hits_.Get();
  m.cache_misses = cache_misses_.Get();
  m.board_overdue = board_overdue_.Get();
  if (gate_ != nullptr) m.wait_s = Seconds(gate_->wait_time());
  return m;
}

}  // namespace horovod
