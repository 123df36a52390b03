#include "collectives/cross_pipeline.h"

#include <utility>

namespace horovod {

CrossPipeline::CrossPipeline(CollectiveGroup* cross, bool threaded)
    : cross_(cross), threaded_(threaded) {}

CrossPipeline::~CrossPipeline() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CrossPipeline::Submit(char* buf, int64_t count, DataType dtype,
                           ReduceOp op, double postscale) {
  ++outstanding_;
  if (!threaded_) {
    done_.push_back(cross_->Allreduce(buf, count, dtype, op, postscale));
    return;
  }
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{buf, count, dtype, op, postscale});
  }
  cv_.notify_all();
}

Status CrossPipeline::Wait() {
  --outstanding_;
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (threaded_) {
    lock.lock();
    cv_.wait(lock, [this] { return !done_.empty(); });
  }
  Status st = std::move(done_.front());
  done_.pop_front();
  return st;
}

Status CrossPipeline::Drain() {
  Status first;
  while (outstanding_ > 0) {
    Status st = Wait();
    if (first.ok()) first = st;
  }
  return first;
}

void CrossPipeline::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, nothing left
    const Job job = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    Status st =
        cross_->Allreduce(job.buf, job.count, job.dtype, job.op, job.postscale);
    lock.lock();
    done_.push_back(std::move(st));
    cv_.notify_all();
  }
}

}  // namespace horovod
