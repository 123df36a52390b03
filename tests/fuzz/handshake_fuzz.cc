// libFuzzer target: what an unauthenticated peer can make a rank read. The
// input arrives on a real socket (a socketpair, closed after it) while the
// rank runs the accepting or the connecting side of the handshake, or reads
// one length-prefixed frame. Each must end in a Status, never a crash, a
// hang or an allocation sized by the peer.
//
// First byte: 0-2 picks server handshake, client handshake, frame.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "net/socket.h"
#include "rendezvous/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 60000) return 0;  // fits a socket buffer
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) return 0;
  horovod::Socket mine(fds[0]);
  {
    horovod::Socket peer(fds[1]);
    if (!peer.WriteAll(data + 1, size - 1, horovod::Deadline::After(5)).ok())
      return 0;
    shutdown(fds[1], SHUT_WR);
    horovod::HandshakeParams p;
    p.secret = "fuzz-secret";
    p.my_rank = 0;
    p.job_size = 4;
    const horovod::Deadline deadline = horovod::Deadline::After(5);
    switch (data[0] % 3) {
      case 0: {
        int rank;
        horovod::LinkKind kind;
        (void)horovod::ServerHandshake(mine, p, deadline, &rank, &kind);
        break;
      }
      case 1:
        (void)horovod::ClientHandshake(mine, p, 1, deadline);
        break;
      default: {
        std::string body;
        (void)mine.ReadFrame(1 << 20, deadline, &body);
        break;
      }
    }
  }
  return 0;
}
