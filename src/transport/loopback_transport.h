// LoopbackTransport: a Transport between threads of one process, for unit
// tests of the collective algorithms at any world size without sockets.
// A LoopbackFabric owns the byte queues; each rank's thread uses its own
// LoopbackTransport. Queues are unbounded, so sends never block.
#ifndef HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_
#define HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.h"

namespace horovod {

class LoopbackFabric {
 public:
  explicit LoopbackFabric(int size);
  int size() const { return size_; }

 private:
  friend class LoopbackTransport;
  struct Pipe {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<char> bytes;
  };
  Pipe& pipe(int from, int to) { return *pipes_[from * size_ + to]; }
  int size_;
  std::vector<std::unique_ptr<Pipe>> pipes_;
};

class LoopbackTransport : public Transport {
 public:
  LoopbackTransport(LoopbackFabric* fabric, int rank)
      : fabric_(fabric), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return fabric_->size(); }
  Status SendRecv(int dst, const void* sbuf, size_t slen, int src, void* rbuf,
                  size_t rlen, size_t chunk, const ChunkFn* on_chunk) override;
  void Abort(const std::string&) override {}

 private:
  LoopbackFabric* fabric_;
  int rank_;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_LOOPBACK_TRANSPORT_H_
