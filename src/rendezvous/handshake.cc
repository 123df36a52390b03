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

Status ClientHandshake(Socket& s, const HandshakeParams& p, int server_rank,
                       Deadline deadline) {
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
  HVD_RETURN_IF_ERROR(s.WriteAll(mine.data(), mine.size(), deadline));
  s.Seal(Proof(p.secret, "hvd-session", hello.nonce, reply.nonce, hello.kind,
               p.my_rank, server_rank, p.job_size),
         true);
  return Status::OK();
}

HandshakeResponder::HandshakeResponder(const HandshakeParams& p)
    : p_(p), want_(sizeof(ClientHello)) {}

Status HandshakeResponder::Take(const uint8_t* data, size_t n,
                                std::string* reply) {
  reply->clear();
  if (n > want_) return Status::Aborted("handshake record overrun");
  got_.append(reinterpret_cast<const char*>(data), n);
  want_ -= n;
  if (want_ > 0) return Status::OK();
  if (stage_ == Stage::kHello) {
    ClientHello hello;
    std::memcpy(&hello, got_.data(), sizeof(hello));
    if (hello.magic != kHelloMagic || hello.version != kVersion)
      return Status::Aborted("bad handshake magic or version");
    if (hello.kind != static_cast<uint8_t>(LinkKind::kControl) &&
        hello.kind != static_cast<uint8_t>(LinkKind::kData))
      return Status::Aborted("bad link kind " + std::to_string(hello.kind));
    if (hello.size != p_.job_size || hello.rank < 0 ||
        hello.rank >= p_.job_size || hello.rank == p_.my_rank)
      return Status::Aborted("peer claims rank " + std::to_string(hello.rank) +
                             " of " + std::to_string(hello.size) +
                             ", this job has " + std::to_string(p_.job_size));
    ServerHello out{};
    out.magic = kHelloMagic;
    out.version = kVersion;
    out.kind = hello.kind;
    out.rank = p_.my_rank;
    out.size = p_.job_size;
    if (!SecureRandom(out.nonce, sizeof(out.nonce)))
      return Status::Internal("no secure random source");
    Digest mac = Proof(p_.secret, "hvd-server", hello.nonce, out.nonce,
                       hello.kind, hello.rank, p_.my_rank, p_.job_size);
    std::memcpy(out.mac, mac.data(), 32);
    client_rank_ = hello.rank;
    kind_ = static_cast<LinkKind>(hello.kind);
    std::memcpy(client_nonce_, hello.nonce, sizeof(client_nonce_));
    std::memcpy(server_nonce_, out.nonce, sizeof(server_nonce_));
    reply->assign(reinterpret_cast<const char*>(&out), sizeof(out));
    stage_ = Stage::kProof;
    want_ = 32;
    got_.clear();
    return Status::OK();
  }
  Digest got;
  std::memcpy(got.data(), got_.data(), got.size());
  Digest expect =
      Proof(p_.secret, "hvd-client", server_nonce_, client_nonce_,
            static_cast<uint8_t>(kind_), client_rank_, p_.my_rank, p_.job_size);
  if (!DigestEqual(expect, got))
    return Status::Aborted("client claiming rank " +
                           std::to_string(client_rank_) +
                           " failed authentication");
  stage_ = Stage::kDone;
  got_.clear();
  return Status::OK();
}

Digest HandshakeResponder::session_key() const {
  return Proof(p_.secret, "hvd-session", client_nonce_, server_nonce_,
               static_cast<uint8_t>(kind_), client_rank_, p_.my_rank,
               p_.job_size);
}

Status ServerHandshake(Socket& s, const HandshakeParams& p, Deadline deadline,
                       int* client_rank, LinkKind* kind) {
  HandshakeResponder responder(p);
  uint8_t buf[64];
  std::string reply;
  while (!responder.done()) {
    const size_t n = responder.wanted();
    HVD_RETURN_IF_ERROR(s.ReadAll(buf, n, deadline));
    HVD_RETURN_IF_ERROR(responder.Take(buf, n, &reply));
    if (!reply.empty())
      HVD_RETURN_IF_ERROR(s.WriteAll(reply.data(), reply.size(), deadline));
  }
  *client_rank = responder.client_rank();
  *kind = responder.kind();
  s.Seal(responder.session_key(), false);
  return Status::OK();
}

}  // namespace horovod
