// CrossPipeline: runs the leaders' cross-host allreduces of a segmented
// hierarchical allreduce, in the order they are submitted, either on a
// thread of its own (so the host's shared-memory phases of one segment
// overlap the network transfer of another) or inline, at Submit, when the
// caller must not share the transport with a second thread. Either way every
// leader issues the same sequence of cross-host calls.
//
// Owns its thread (started on first use, joined in the destructor); does
// not own the group or the buffers. Submit and Wait are called by one
// thread, the group's user; the group is used only by the pipeline's
// thread between a Submit and the Wait that collects it.
#ifndef HOROVOD_COLLECTIVES_CROSS_PIPELINE_H_
#define HOROVOD_COLLECTIVES_CROSS_PIPELINE_H_

#include <horovod/status.h>
#include <horovod/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "collectives/collective_group.h"

namespace horovod {

class CrossPipeline {
 public:
  CrossPipeline(CollectiveGroup* cross, bool threaded);
  ~CrossPipeline();
  CrossPipeline(const CrossPipeline&) = delete;
  CrossPipeline& operator=(const CrossPipeline&) = delete;

  // Queues an in-place allreduce of `count` elements at `buf` across the
  // leaders, the result multiplied by `postscale`.
  void Submit(char* buf, int64_t count, DataType dtype, ReduceOp op,
              double postscale = 1.0);
  // The status of the oldest submitted allreduce not yet collected, once it
  // is done. Bounded by the group's own deadlines (the transport's
  // operation timeout, or its abort).
  Status Wait();
  // Collects every outstanding allreduce; the first failure, if any.
  Status Drain();
  int outstanding() const { return outstanding_; }

 private:
  struct Job {
    char* buf;
    int64_t count;
    DataType dtype;
    ReduceOp op;
    double postscale;
  };
  void Run();

  CollectiveGroup* cross_;
  const bool threaded_;
  int outstanding_ = 0;  // submitted, not yet collected (caller's thread)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;     // guarded by mu_
  std::deque<Status> done_;  // guarded by mu_, in submission order
  bool stop_ = false;        // guarded by mu_
  std::thread thread_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_CROSS_PIPELINE_H_
