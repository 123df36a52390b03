#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <new>
#include <utility>

#include "runtime/handle_state.h"

namespace horovod {

Buffer::Buffer(size_t bytes) : size_(bytes) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  data_ = aligned_alloc(64, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Buffer::~Buffer() { free(data_); }

Handle::Handle(const Handle& o) : state_(o.state_) {
  if (state_ != nullptr) state_->Ref();
}
Handle::Handle(Handle&& o) noexcept : state_(o.state_) { o.state_ = nullptr; }
Handle& Handle::operator=(Handle o) noexcept {
  std::swap(state_, o.state_);
  return *this;
}
Handle::~Handle() {
  if (state_ != nullptr) state_->Unref();
}

bool Handle::Poll() const { return state_->Done(); }

namespace {

// A finished state's status; a success (nearly every one) is returned
// without copying the state's message string.
Status Result(const HandleState& h) {
  return h.status.ok() ? Status::OK() : h.status;
}

Status Sleep(HandleState& h, std::chrono::steady_clock::time_point until) {
  if (!h.Sleep(until)) return Status::Timeout("operation still in progress");
  return Result(h);
}

}  // namespace

Status Handle::Wait(double timeout_s) const {
  using SteadyClock = std::chrono::steady_clock;
  if (Poll()) return Result(*state_);
  // Only a timeout needs the clock here: the drive reads it when its steps
  // need the time, and the wait is timed by the gate's cheaper ticks.
  const auto until =
      timeout_s < 0 ? SteadyClock::time_point::max()
                    : SteadyClock::now() +
                          std::chrono::duration_cast<SteadyClock::duration>(
                              std::chrono::duration<double>(timeout_s));
  if (state_->gate == nullptr) return Sleep(*state_, until);
  DriveGate& gate = *state_->gate;
  const uint64_t begin = gate.ticks().Now();
  // A driving caller tells the engine itself once its wait grows long.
  if (gate.Drive(*state_, until) && Poll()) {
    gate.AddWaitTicks(gate.ticks().Since(begin));
    return Result(*state_);
  }
  // The engine reports what this rank's threads are blocked on to rank 0,
  // from here until the wait ends, however it ends. A drive that returned
  // first did so at once, or at `until`.
  gate.Waiting(*state_, true, SteadyClock::now());
  Status st = Sleep(*state_, until);
  gate.Waiting(*state_, false, SteadyClock::now());
  gate.AddWaitTicks(gate.ticks().Since(begin));
  return st;
}

const Status& Handle::status() const { return state_->status; }
std::shared_ptr<Buffer> Handle::output() const { return state_->output; }
const std::vector<int64_t>& Handle::output_shape() const {
  return state_->output_shape;
}
const std::vector<int64_t>& Handle::received_splits() const {
  return state_->received_splits;
}
int Handle::int_result() const { return state_->int_result; }
DataType Handle::dtype() const { return state_->dtype; }

}  // namespace horovod
