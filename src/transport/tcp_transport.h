// TcpTransport: Transport over the authenticated data mesh built by the
// rendezvous. Owns one socket per peer. With `data_mac` every message
// carries a Poly1305 tag under a one-time key from its sealed socket
// (Socket::NextMessageKey), so a message altered on the network fails the
// call as kTampered; both ends of a link must agree on it (an agreed knob).
// See transport.h for thread-safety.
#ifndef HOROVOD_TRANSPORT_TCP_TRANSPORT_H_
#define HOROVOD_TRANSPORT_TCP_TRANSPORT_H_

#include <atomic>
#include <mutex>
#include <vector>

#include "net/socket.h"
#include "transport/transport.h"

namespace horovod {

class TcpTransport : public Transport {
 public:
  // With data_mac every peer's socket must be sealed.
  TcpTransport(int rank, std::vector<Socket> peers, double timeout_s,
               bool data_mac = false);
  ~TcpTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(peers_.size()); }
  Status SendRecvV(int dst, const iovec* send, size_t nsend, int src,
                   const iovec* recv, size_t nrecv, size_t chunk,
                   const ChunkFn* on_chunk) override;
  void Abort(const std::string& reason) override;
  // The socket to `peer` (-1 for ourselves), for liveness checks by others.
  int PeerFd(int peer) const { return peers_[peer].fd(); }

 private:
  Status AbortedStatus();

  const int rank_;
  std::vector<Socket> peers_;
  const double timeout_s_;
  const bool data_mac_;
  int abort_fd_;  // eventfd: wakes a SendRecv blocked in poll
  std::atomic<bool> aborted_{false};
  std::mutex reason_mu_;
  std::string reason_;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_TCP_TRANSPORT_H_
