// Handshake: mutual authentication of a fresh connection with the job's
// secret, before either side reads a message body. Each side proves knowledge
// of the key with an HMAC over both fresh nonces, the connection's purpose
// and both ranks, so a recorded handshake cannot be replayed and a peer of
// another job (another key) is refused. Fixed-size records only.
#ifndef HOROVOD_RENDEZVOUS_HANDSHAKE_H_
#define HOROVOD_RENDEZVOUS_HANDSHAKE_H_

#include <horovod/status.h>

#include <string>

#include "rendezvous/socket.h"

namespace horovod {

enum class LinkKind : uint8_t { kControl = 1, kData = 2 };

struct HandshakeParams {
  std::string secret;
  int my_rank = 0;
  int job_size = 1;
  LinkKind kind = LinkKind::kData;
};

// The connecting side; `server_rank` is who we expect to reach.
Status ClientHandshake(const Socket& s, const HandshakeParams& p,
                       int server_rank, Deadline deadline);
// The accepting side; on success *client_rank and *kind say who connected.
Status ServerHandshake(const Socket& s, const HandshakeParams& p,
                       Deadline deadline, int* client_rank, LinkKind* kind);

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_HANDSHAKE_H_
