// Handshake: mutual authentication of a fresh connection with the job's
// secret, before either side reads a message body. Each side proves knowledge
// of the key with an HMAC over both fresh nonces, the connection's purpose
// and both ranks, so a recorded handshake cannot be replayed and a peer of
// another job (another key) is refused. Fixed-size records only. Both sides
// also derive a session key from the same inputs and seal the socket with
// it (Socket::Seal): every later frame on a control link carries a MAC, and
// a data link's messages can (TcpTransport's data MAC).
#ifndef HOROVOD_RENDEZVOUS_HANDSHAKE_H_
#define HOROVOD_RENDEZVOUS_HANDSHAKE_H_

#include <horovod/status.h>

#include <string>

#include "net/socket.h"

namespace horovod {

enum class LinkKind : uint8_t { kControl = 1, kData = 2 };

struct HandshakeParams {
  std::string secret;
  int my_rank = 0;
  int job_size = 1;
  LinkKind kind = LinkKind::kData;
};

// The connecting side; `server_rank` is who we expect to reach. Seals `s`.
Status ClientHandshake(Socket& s, const HandshakeParams& p, int server_rank,
                       Deadline deadline);
// The accepting side as a state machine that never blocks, so one thread
// can run many handshakes at once (LinkAcceptor): feed it the bytes that
// arrive, send what it returns. It reads only fixed-size records and checks
// each before asking for the next.
class HandshakeResponder {
 public:
  explicit HandshakeResponder(const HandshakeParams& p);
  // Bytes still needed to complete the current record; 0 once done.
  size_t wanted() const { return want_; }
  // Takes up to wanted() bytes. When a record completes it is checked, and
  // *reply is what to send back (possibly nothing). Errors are final.
  Status Take(const uint8_t* data, size_t n, std::string* reply);
  bool done() const { return stage_ == Stage::kDone; }
  // Valid once done.
  int client_rank() const { return client_rank_; }
  LinkKind kind() const { return kind_; }
  // The key both sides derived for sealing this link's frames.
  Digest session_key() const;

 private:
  enum class Stage { kHello, kProof, kDone };
  HandshakeParams p_;
  Stage stage_ = Stage::kHello;
  size_t want_;
  std::string got_;
  int client_rank_ = -1;
  LinkKind kind_ = LinkKind::kData;
  uint8_t client_nonce_[16] = {};
  uint8_t server_nonce_[16] = {};
};

// The accepting side, blocking until done or the deadline; on success
// *client_rank and *kind say who connected. Seals `s`.
Status ServerHandshake(Socket& s, const HandshakeParams& p, Deadline deadline,
                       int* client_rank, LinkKind* kind);

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_HANDSHAKE_H_
