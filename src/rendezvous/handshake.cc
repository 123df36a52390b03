#include "rendezvous/handshake.h"

#include <cstring>

#include "common/hmac.h"

namespace horovod {
namespace {

constexpr uint32_t kHelloMagic = 0x48445648;  // "HVDH"
constexpr uint16_t kVersion = 1;

#pragma pack(push, 1)
struct ClientHello {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;
  uint8_t reserved;
  int32_t rank;
  int32_t size;
  uint8_t nonce[16];
};
struct ServerHello {
  uint32_t magic;
  uint16_t version;
  uint8_t kind;
  uint8_t reserved;
  int32_t rank;
  int32_t size;
  uint8_t nonce[16];
  uint8_t mac[32];
};
#pragma pack(pop)

Digest Proof(const std::string& secret, const char* role, const uint8_t* n1,
             const uint8_t* n2, uint8_t kind, int32_t client, int32_t server,
             int32_t size) {
  uint8_t msg[16 + 16 + 16 + 1 + 12];
  std::memset(msg, 0, sizeof(msg));
  std::strncpy(reinterpret_cast<char*>(msg), role, 15);
  std::memcpy(msg + 16, n1, 16);
  std::memcpy(msg + 32, n2, 16);
  msg[48] = kind;
  std::memcpy(msg + 49, &client, 4);
  std::memcpy(msg + 53, &server, 4);
  std::memcpy(msg + 57, &size, 4);
  return HmacSha256(secret, msg, sizeof(msg));
}

}  // namespace

Status ClientHandshake(const Socket& s, const HandshakeParams& p,
                       int server_rank, Deadline deadline) {
  ClientHello hello{};
  hello.magic = kHelloMagic;
  hello.version = kVersion;
  hello.kind = static_cast<uint8_t>(p.kind);
  hello.rank = p.my_rank;
  hello.size = p.job_size;
  if (!SecureRandom(hello.nonce, sizeof(hello.nonce)))
    return Status::Internal("no secure random source");
  HVD_RETURN_IF_ERROR(s.WriteAll(&hello, sizeof(hello), deadline));
  ServerHello reply;
  HVD_RETURN_IF_ERROR(s.ReadAll(&reply, sizeof(reply), deadline));
  if (reply.magic != kHelloMagic || reply.version != kVersion)
    return Status::Aborted(
        "peer is not a horovod rank of a compatible version");
  if (reply.rank != server_rank || reply.size != p.job_size)
    return Status::Aborted("expected rank " + std::to_string(server_rank) +
                           " of " + std::to_string(p.job_size) +
                           ", reached rank " + std::to_string(reply.rank) +
                           " of " + std::to_string(reply.size));
  Digest expect = Proof(p.secret, "hvd-server", hello.nonce, reply.nonce,
                        hello.kind, p.my_rank, server_rank, p.job_size);
  Digest got;
  std::memcpy(got.data(), reply.mac, 32);
  if (!DigestEqual(expect, got))
    return Status::Aborted("rank " + std::to_string(server_rank) +
                           " failed authentication (wrong job secret)");
  Digest mine = Proof(p.secret, "hvd-client", reply.nonce, hello.nonce,
                      hello.kind, p.my_rank, server_rank, p.job_size);
  return s.WriteAll(mine.data(), mine.size(), deadline);
}

Status ServerHandshake(const Socket& s, const HandshakeParams& p,
                       Deadline deadline, int* client_rank, LinkKind* kind) {
  ClientHello hello;
  HVD_RETURN_IF_ERROR(s.ReadAll(&hello, sizeof(hello), deadline));
  if (hello.magic != kHelloMagic || hello.version != kVersion)
    return Status::Aborted("bad handshake magic or version");
  if (hello.kind != static_cast<uint8_t>(LinkKind::kControl) &&
      hello.kind != static_cast<uint8_t>(LinkKind::kData))
    return Status::Aborted("bad link kind " + std::to_string(hello.kind));
  if (hello.size != p.job_size || hello.rank < 0 || hello.rank >= p.job_size ||
      hello.rank == p.my_rank)
    return Status::Aborted("peer claims rank " + std::to_string(hello.rank) +
                           " of " + std::to_string(hello.size) +
                           ", this job has " + std::to_string(p.job_size));
  ServerHello reply{};
  reply.magic = kHelloMagic;
  reply.version = kVersion;
  reply.kind = hello.kind;
  reply.rank = p.my_rank;
  reply.size = p.job_size;
  if (!SecureRandom(reply.nonce, sizeof(reply.nonce)))
    return Status::Internal("no secure random source");
  Digest mac = Proof(p.secret, "hvd-server", hello.nonce, reply.nonce,
                     hello.kind, hello.rank, p.my_rank, p.job_size);
  std::memcpy(reply.mac, mac.data(), 32);
  HVD_RETURN_IF_ERROR(s.WriteAll(&reply, sizeof(reply), deadline));
  Digest got;
  HVD_RETURN_IF_ERROR(s.ReadAll(got.data(), got.size(), deadline));
  Digest expect = Proof(p.secret, "hvd-client", reply.nonce, hello.nonce,
                        hello.kind, hello.rank, p.my_rank, p.job_size);
  if (!DigestEqual(expect, got))
    return Status::Aborted("client claiming rank " +
                           std::to_string(hello.rank) +
                           " failed authentication");
  *client_rank = hello.rank;
  *kind = static_cast<LinkKind>(hello.kind);
  return Status::OK();
}

}  // namespace horovod
