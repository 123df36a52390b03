// Transport: ordered byte streams between every pair of ranks, what the
// point-to-point collective algorithms (TcpGroup) are written against.
// Implementations: TcpTransport (sockets), LoopbackTransport (threads in one
// process, for tests). Shared memory is not a Transport: its collectives read
// the peers' memory directly (ShmCollectiveGroup); the two meet one level up,
// at CollectiveGroup.
//
// Messages between a pair are delivered in order and are not tagged: every
// rank runs the same collectives in the same order (the coordinator ensures
// it), so the stream position is the tag.
//
// Thread-safety: SendRecvV is called by one thread at a time (the engine's
// background loop). Abort may be called from any thread.
#ifndef HOROVOD_TRANSPORT_TRANSPORT_H_
#define HOROVOD_TRANSPORT_TRANSPORT_H_

#include <horovod/status.h>
#include <sys/uio.h>

#include <cstddef>
#include <functional>
#include <string>

namespace horovod {

// Called as received bytes arrive, once per `chunk` bytes (the last may be
// shorter), in order, so the caller can reduce one chunk while the next one
// is still on the wire.
using ChunkFn = std::function<void(size_t offset, size_t len)>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends the bytes of `send` (nsend spans, in order) to dst while
  // receiving into `recv` (nrecv spans, filled in order) from src,
  // progressing both at once so that rings and exchanges cannot deadlock.
  // A message gathered from or scattered to spans is the same byte stream
  // as the contiguous one: the peer's span layout need not match. dst or
  // src may be -1 to only receive or only send. `on_chunk` is called once
  // per `chunk` received bytes, with offsets into the whole received
  // message. Fails if a peer disconnects, stays silent past the operation
  // timeout, or the transport was aborted.
  virtual Status SendRecvV(int dst, const iovec* send, size_t nsend, int src,
                           const iovec* recv, size_t nrecv, size_t chunk = 0,
                           const ChunkFn* on_chunk = nullptr) = 0;

  // SendRecvV with one span on each side.
  Status SendRecv(int dst, const void* sbuf, size_t slen, int src, void* rbuf,
                  size_t rlen, size_t chunk = 0,
                  const ChunkFn* on_chunk = nullptr) {
    const iovec s{const_cast<void*>(sbuf), slen}, r{rbuf, rlen};
    return SendRecvV(dst, &s, 1, src, &r, 1, chunk, on_chunk);
  }

  Status Send(int dst, const void* buf, size_t len) {
    return SendRecv(dst, buf, len, -1, nullptr, 0);
  }
  Status Recv(int src, void* buf, size_t len) {
    return SendRecv(-1, nullptr, 0, src, buf, len);
  }

  // Fails every current and later call with `reason`, and makes peers see
  // the connection drop so that they fail promptly too.
  virtual void Abort(const std::string& reason) = 0;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_TRANSPORT_H_
