// Communicator: the members of one process set seen through a Transport,
// renumbered 0..size-1, plus the persistent scratch the algorithms need.
// Scratch grows to the largest size asked for and is kept (and pre-touched),
// so the data path does not allocate per call. Used by one thread at a time.
#ifndef HOROVOD_COLLECTIVES_COMMUNICATOR_H_
#define HOROVOD_COLLECTIVES_COMMUNICATOR_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "transport/transport.h"

namespace horovod {

struct AlgorithmConfig {
  int64_t small_allreduce_bytes = 64 * 1024;
  int64_t ring_chunk_bytes = 1 << 20;
};

// Grow-only byte buffer whose pages are touched when it grows, so that the
// first collective that uses new space does not pay page faults mid-transfer.
class Scratch {
 public:
  char* Get(size_t bytes) {
    if (bytes > buf_.size()) {
      buf_.resize(bytes);
      std::memset(buf_.data(), 0, buf_.size());
    }
    return buf_.data();
  }

 private:
  std::vector<char> buf_;
};

class Communicator {
 public:
  // `members` are global ranks in ascending order and must include ours.
  Communicator(Transport* transport, std::vector<int> members, Scratch* scratch,
               AlgorithmConfig config);

  int rank() const { return my_index_; }
  int size() const { return static_cast<int>(members_.size()); }
  int global_rank(int index) const { return members_[index]; }
  const AlgorithmConfig& config() const { return config_; }
  char* scratch(size_t bytes) { return scratch_->Get(bytes); }

  // As Transport::SendRecv, with peers given as member indices.
  Status SendRecv(int dst, const void* sbuf, size_t slen, int src, void* rbuf,
                  size_t rlen, size_t chunk = 0,
                  const ChunkFn* on_chunk = nullptr);
  // As Transport::SendRecvV, with peers given as member indices.
  Status SendRecvV(int dst, const iovec* send, size_t nsend, int src,
                   const iovec* recv, size_t nrecv, size_t chunk = 0,
                   const ChunkFn* on_chunk = nullptr);

 private:
  Transport* transport_;
  std::vector<int> members_;
  int my_index_ = -1;
  Scratch* scratch_;
  AlgorithmConfig config_;
};

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_COMMUNICATOR_H_
