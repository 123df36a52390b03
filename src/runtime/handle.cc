#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <new>

#include "runtime/handle_state.h"

namespace horovod {

Buffer::Buffer(size_t bytes) : size_(bytes) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  if (rounded == 0) rounded = 64;
  data_ = aligned_alloc(64, rounded);
  if (data_ == nullptr) throw std::bad_alloc();
}

Buffer::~Buffer() { free(data_); }

bool Handle::Poll() const { return state_->Done(); }

Status Handle::Wait(double timeout_s) const {
  using SteadyClock = std::chrono::steady_clock;
  const auto until =
      timeout_s < 0 ? SteadyClock::time_point::max()
                    : SteadyClock::now() +
                          std::chrono::duration_cast<SteadyClock::duration>(
                              std::chrono::duration<double>(timeout_s));
  if (state_->gate != nullptr && !Poll()) state_->gate->Drive(*state_, until);
  std::unique_lock<std::mutex> lock(state_->mu);
  if (timeout_s < 0) {
    state_->cv.wait(lock, [&] { return state_->done; });
  } else if (!state_->cv.wait_until(lock, until,
                                    [&] { return state_->done; })) {
    return Status::Timeout("operation still in progress");
  }
  return state_->status;
}

const Status& Handle::status() const { return state_->status; }
std::shared_ptr<Buffer> Handle::output() const { return state_->output; }
const std::vector<int64_t>& Handle::output_shape() const {
  return state_->output_shape;
}
const std::vector<int64_t>& Handle::received_splits() const {
  return state_->received_splits;
}
int Handle::join_result() const { return state_->int_result; }
DataType Handle::dtype() const { return state_->dtype; }

}  // namespace horovod
