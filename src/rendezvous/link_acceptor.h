// LinkAcceptor: takes a listener's authenticated links during the
// rendezvous. All pending connections are handshaken at once on one thread
// (poll over every one of them), so a client that sends nothing, or one byte
// a second, holds only its own slot until its handshake deadline, and a
// flood is bounded by a cap on pending connections (the oldest is dropped to
// make room). Nothing but the fixed-size handshake records is read before a
// peer proves it holds the job's secret; after that, an optional first frame
// (a control link's announcement) is read under the same deadline and a size
// limit. Rejected connections are closed and logged (the first few one by
// one, then in summary) and the wait goes on.
//
// Thread-compatible: one thread runs Run; the listener is borrowed.
#ifndef HOROVOD_RENDEZVOUS_LINK_ACCEPTOR_H_
#define HOROVOD_RENDEZVOUS_LINK_ACCEPTOR_H_

#include <horovod/status.h>

#include <functional>
#include <string>
#include <vector>

#include "net/socket.h"
#include "rendezvous/handshake.h"

namespace horovod {

struct AcceptorOptions {
  size_t max_pending = 64;     // connections handshaking at once
  double handshake_s = 5;      // per connection: handshake and first frame
  size_t first_frame_max = 0;  // 0: no frame follows the handshake
};

class LinkAcceptor {
 public:
  // Whether a link from this rank is expected.
  using Wanted = std::function<bool(int rank)>;
  // Called for each authenticated link with its first frame (if any); an
  // error rejects the link and leaves the rank's slot open.
  using OnLink = std::function<Status(int rank, const std::string& frame)>;

  LinkAcceptor(const Socket& listener, const HandshakeParams& hp, LinkKind kind,
               AcceptorOptions options);

  // Fills (*links)[r] for every wanted rank r, or fails at the deadline
  // naming the ranks that never connected.
  Status Run(Deadline deadline, std::vector<Socket>* links,
             const Wanted& wanted, const OnLink& on_link);

  int rejected() const { return rejected_; }

 private:
  struct Pending;
  // Reads what has arrived; true once the link is complete.
  Status Advance(Pending* p, bool* complete);
  void Reject(const Pending& p, const std::string& why);

  const Socket& listener_;
  HandshakeParams hp_;
  LinkKind kind_;
  AcceptorOptions options_;
  int rejected_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_LINK_ACCEPTOR_H_
