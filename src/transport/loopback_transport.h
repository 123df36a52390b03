// LoopbackTransport: a Transport between threads of one process, for unit
// tests of the collective algorithms at any world size without sockets.
// A LoopbackFabric owns the byte queues; each rank's thread uses its own
// LoopbackTransport. Queues are unbounded, so sends never block. A receive
// waits at most the fabric's timeout, and an Abort on any rank ends every
// wait on the fabric at once, so a rank that stops early (a failed test
// assertion) fails its peers quickly instead of leaving them waiting.
//
// Thread-safety: one thread per LoopbackTransport; Abort from any thread.
#ifndef HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_
#define HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace horovod {

class LoopbackFabric {
 public:
  explicit LoopbackFabric(int size, double timeout_s = 60);
  int size() const { return size_; }
  // Every wait on the fabric, now and later, ends with Aborted(reason).
  void Abort(const std::string& reason);

 private:
  friend class LoopbackTransport;
  struct Pipe {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<char> bytes;
  };
  Pipe& pipe(int from, int to) { return *pipes_[from * size_ + to]; }
  Status AbortedStatus();

  int size_;
  double timeout_s_;
  std::vector<std::unique_ptr<Pipe>> pipes_;
  std::atomic<bool> aborted_{false};
  std::mutex reason_mu_;
  std::string reason_;
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(LoopbackFabric* fabric, int rank)
      : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  Status SendRecvV(int dst, const iovec* send, size_t nsend, int src,
                   const iovec* recv, size_t nrecv, size_t chunk,
                   const ChunkFn* on_chunk) override;
  void Abort(const std::string& reason) override { fabric_->Abort(reason); }

 private:
  LoopbackFabric* fabric_;
  int rank_;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_
