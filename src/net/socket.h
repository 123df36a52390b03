// Socket: RAII file descriptor plus the blocking-with-deadline primitives the
// rendezvous and transports build on. All fds are non-blocking; every read
// and write waits with poll(2) against a Deadline. Thread-compatible.
#ifndef HOROVOD_NET_SOCKET_H_
#define HOROVOD_NET_SOCKET_H_

#include <horovod/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/hmac.h"

namespace horovod {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { Close(); }
  Socket(Socket&& o) noexcept : fd_(o.fd_), seal_(std::move(o.seal_)) {
    o.fd_ = -1;
  }
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = o.fd_;
      seal_ = std::move(o.seal_);
      o.fd_ = -1;
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();

  // Listens on addr:port (port 0: ephemeral). `backlog` bounds queued peers.
  static Status Listen(const std::string& addr, int port, int backlog,
                       Socket* out, int* bound_port);
  // Retries refused connections until the deadline (the peer may not be up).
  static Status Connect(const std::string& host, int port, Deadline deadline,
                        Socket* out);
  Status Accept(Deadline deadline, Socket* out, std::string* peer) const;
  // Accepts one queued peer without waiting; *got says whether there was
  // one. Out of file descriptors (EMFILE, ENFILE) is kTimeout: retry after
  // closing something.
  Status TryAccept(Socket* out, std::string* peer, bool* got) const;
  // Reads what has arrived, up to len, without waiting (*got may be 0). The
  // peer's close is an error.
  Status ReadSome(void* buf, size_t len, size_t* got) const;

  Status WriteAll(const void* buf, size_t len, Deadline deadline) const;
  Status ReadAll(void* buf, size_t len, Deadline deadline) const;
  // A frame is a 4-byte magic, a 4-byte little-endian length, then the body.
  // Lengths above max_len are rejected before anything is allocated.
  Status WriteFrame(const std::string& body, Deadline deadline) const;
  Status ReadFrame(size_t max_len, Deadline deadline, std::string* body) const;

  // From now on every frame in either direction ends with an HMAC-SHA256
  // (under `key`, agreed in the handshake) over the sender's direction, its
  // frame count and the body: a frame altered, replayed, reordered, dropped
  // or reflected on the way fails ReadFrame. `initiator`: we connected.
  void Seal(const Digest& key, bool initiator);
  bool sealed() const { return seal_ != nullptr; }
  // Checks and strips the tag of a sealed frame read by other means (the
  // rendezvous acceptor reads without blocking); counts it as received.
  Status Unseal(std::string* frame) const;
  static constexpr size_t kSealBytes = 32;
  // For bulk data that does not travel in frames: the one-time key of the
  // next message in one direction (Poly1305's, 32 bytes), derived from the
  // seal's key, the direction and the message's count, so a message that
  // is altered, replayed, reordered or reflected fails its tag. Counts the
  // message. Only on a sealed socket.
  Digest NextMessageKey(bool sending) const;

  std::string LocalAddress() const;
  void TuneForBulk() const;

 private:
  struct FrameSeal {
    explicit FrameSeal(const Digest& key) : mac(key) {}
    HmacKey mac;
    uint8_t send_dir = 0, recv_dir = 0;
    uint64_t sent = 0, received = 0;
    uint64_t messages_sent = 0, messages_received = 0;
  };
  Digest Tag(uint8_t dir, uint64_t seq, const char* body, size_t len) const;

  int fd_ = -1;
  // Frame counters advance inside the const frame calls, as the socket's
  // own file position would.
  std::unique_ptr<FrameSeal> seal_;
};

constexpr uint32_t kFrameMagic = 0x31445648;  // "HVD1"

// This host's IPv4 addresses in interface order, loopback ones last.
std::vector<std::string> LocalIPv4Addresses();

}  // namespace horovod

#endif  // HOROVOD_NET_SOCKET_H_
