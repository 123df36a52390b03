// EngineImpl, failures: heartbeats and peer silence, finding the rank that
// actually failed, and telling every peer when the job cannot go on.
#include "common/silence_verdict.h"
#include "runtime/engine_impl.h"

namespace horovod {

Status EngineImpl::RootCause(const Status& st) {
  if (job_.size == 1) return st;
  if (job_.rank != 0) {
    // Rank 0 and this host's ranks may be waiting for this rank inside the
    // collective that failed here: tell rank 0 why first, then stop the
    // waits on this rank, so rank 0 fails at once with this cause and its
    // verdict comes back within the wait below.
    ReportFailure(st.message());
    return FromCoordinator(st, false);
  }
  Deadline deadline = Deadline::After(1.0);
  for (size_t r = 1; r < control_.size(); ++r) {
    std::string frame;
    while (!deadline.Expired()) {
      control_[r]->Probe();
      if (!control_[r]->HasData()) break;
      if (!control_[r]->ReadFrame(kMaxControlFrame, deadline, &frame).ok())
        return Disconnected(static_cast<int>(r), st);
      RequestList l;
      if (!DecodeRequestList(frame, job_.size, &l).ok() ||
          l.abort_reason.empty())
        continue;
      // In a ring, the rank after this one waits for this rank's data while
      // this rank waits for a stopped third one's: both time out together,
      // and that peer's verdict names this rank, which is alive.
      if (SilentRank(l.abort_reason) == 0 && SilentRank(st.message()) > 0)
        continue;
      return Status::Aborted("rank " + std::to_string(r) +
                             " failed: " + l.abort_reason);
    }
  }
  return st;
}

Status EngineImpl::FromCoordinator(const Status& fallback, bool about_rank0) {
  Deadline deadline = Deadline::After(1.0);
  std::string frame;
  Status st;
  while (
      (st = control_[0]->ReadFrame(kMaxControlFrame, deadline, &frame)).ok()) {
    if (frame.empty()) continue;  // a heartbeat
    ResponseList l;
    if (!DecodeResponseList(frame, job_.size, &cache_, &l).ok()) break;
    if (!l.abort_reason.empty()) return Status::Aborted(l.abort_reason);
    if (l.shutdown) {
      shutdown_received_ = true;
      return Status::OK();
    }
  }
  if (about_rank0 || st.ok()) return fallback;
  if (st.code() == StatusCode::kTimeout)
    return Status::Aborted(fallback.message() +
                           "; rank 0 did not answer within 1 s either");
  return Status::Aborted("lost connection to rank 0; it probably died (" +
                         fallback.message() + ")");
}

namespace {

// A sealed frame that failed its check was altered on the way: the peer
// is alive, the network between us is not to be trusted.
bool Tampered(const Status& cause) {
  return cause.code() == StatusCode::kTampered;
}

}  // namespace

Status EngineImpl::Disconnected(int r, const Status& cause) {
  if (Tampered(cause))
    return Status::Aborted("the control link with rank " + std::to_string(r) +
                           " was tampered with: " + cause.message());
  // The transport's own verdict already names the rank and the death.
  if (cause.message().find("it probably died") != std::string::npos)
    return Status::Aborted(cause.message());
  return Status::Aborted("rank " + std::to_string(r) + " disconnected (" +
                         cause.message() + "); it probably died");
}

Status EngineImpl::LostCoordinator(const Status& cause) {
  if (Tampered(cause)) return Disconnected(0, cause);
  return FromCoordinator(
      Status::Aborted("lost connection to rank 0 (" + cause.message() +
                      "); it probably died"),
      true);
}

Status EngineImpl::CheckLiveness(Clock::time_point now) {
  int link = liveness_->Silent(now);
  if (link >= 0) {
    const int peer = job_.rank == 0 ? link + 1 : 0;
    return Status::Aborted(
        SilenceVerdict(peer, liveness_->SilentFor(link, now),
                       "hung or its connection is blackholed"));
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

void EngineImpl::ReportFailure(const std::string& reason) {
  if (!failure_reported_ && !control_.empty() && control_[0]->valid()) {
    failure_reported_ = true;
    RequestList l;
    l.abort_reason = reason;
    if (control_[0]
            ->WriteFrame(EncodeRequestList(l), Deadline::After(0.5))
            .ok())
      (void)control_[0]->Drain(Deadline::After(0.5));
  }
  StopWaits(reason);
}

void EngineImpl::StopWaits(const std::string& reason) {
  if (shm_) shm_->Abort(reason);
  transport_->Abort(reason);
}

void EngineImpl::Fatal(const std::string& reason) {
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
      StopWaits(reason);
    } else {
      ReportFailure(reason);
    }
    if (executor_) executor_->Abort(reason);
    for (auto& link : control_) link->Close();
  }
  queue_.FailAll(Status::Aborted(text));
  executor_->FailBroken(Status::Aborted(text));
}

}  // namespace horovod
