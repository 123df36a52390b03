// Writes the seed corpus of the fuzz targets: well-formed inputs made by the
// real encoders and handshakes, so fuzzing starts from deep inside each
// decoder. Run from the repository root after scripts/fuzz.sh has built it:
//   build/fuzz/tests/fuzz/make_seeds tests/fuzz/corpus
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "coordination/wire.h"
#include "fuzz_cache.h"
#include "net/socket.h"
#include "rendezvous/handshake.h"

namespace horovod {
namespace {

void Write(const std::string& dir, const std::string& name,
           const std::string& bytes) {
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

// Everything the other end of a socketpair received while `speak` ran on
// this end (which gives up after a short deadline, unanswered).
template <typename Fn>
std::string Captured(const std::string& feed, Fn speak) {
  int fds[2];
  socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds);
  Socket mine(fds[0]), peer(fds[1]);
  if (!feed.empty())
    (void)peer.WriteAll(feed.data(), feed.size(), Deadline::After(1));
  speak(mine);
  shutdown(fds[0], SHUT_WR);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[1], buf, sizeof(buf))) > 0) out.append(buf, n);
  return out;
}

void WireSeeds(const std::string& dir) {
  const char jobs4 = 3;  // low bits + 1 = job size 4
  RequestList a;
  a.epoch = 7;
  Request r;
  r.rank = 2;
  r.op = Op::kAllreduce;
  r.name = "grad.conv1";
  r.dtype = DataType::kFloat16;
  r.reduce_op = ReduceOp::kAverage;
  r.shape = {64, 3, 7, 7};
  r.postscale = 0.25;
  a.requests.push_back(r);
  Request t = r;
  t.op = Op::kAlltoall;
  t.name = "tokens";
  t.shape = {8, 16};
  t.splits = {2, 2, 2, 2};
  t.group = "g";
  t.group_size = 2;
  a.requests.push_back(t);
  Request refused;
  refused.rank = 1;
  refused.name = "grad.fc";
  refused.refusal = "unsupported tensor dtype complex64 (rank 1)";
  a.requests.push_back(refused);
  Write(dir, "requests", jobs4 + EncodeRequestList(a));
  RequestList b;
  b.cache_hits = {0, 1, 2};
  b.shutdown = true;
  Write(dir, "hits_shutdown", jobs4 + EncodeRequestList(b));
  RequestList c;
  c.abort_reason = "rank 3 failed";
  Write(dir, "abort", jobs4 + EncodeRequestList(c));
  RequestList w;
  w.waiting_update = true;
  w.waiting = {"0:__barrier__", "2:allgather.x"};
  Write(dir, "waiting", jobs4 + EncodeRequestList(w));
  RequestList sets;
  Request add;
  add.rank = 1;
  add.op = Op::kAddProcessSet;
  add.name = "__add_process_set__";
  add.set_ranks = {0, 1, 3};
  sets.requests.push_back(add);
  Request remove = add;
  remove.op = Op::kRemoveProcessSet;
  remove.name = "__remove_process_set__";
  remove.set_ranks.clear();
  remove.set_id = 2;
  sets.requests.push_back(remove);
  Write(dir, "process_sets", jobs4 + EncodeRequestList(sets));

  ResponseCache cache(8);
  FillFuzzCache(&cache);
  const char resp4 = static_cast<char>(0x80 | jobs4);
  ResponseList l;
  Response fused;
  fused.op = Op::kAllreduce;
  fused.names = {"a", "b"};
  fused.shapes = {{4}, {2, 3}};
  l.responses.push_back(fused);  // travels as slots
  Response g;
  g.op = Op::kAllgather;
  g.names = {"gather"};
  g.dtype = DataType::kInt64;
  g.shapes = {{5, 2}};
  g.sizes = {5, 1, 0, 3};
  l.responses.push_back(g);
  Response e;
  e.op = Op::kBroadcast;
  e.error = true;
  e.error_message = "mismatched shapes";
  e.names = {"w"};
  e.shapes = {{1}};
  l.responses.push_back(e);
  l.stale_hits = {{1, 2}};
  l.small_allreduce_bytes = 65536;
  Write(dir, "responses", resp4 + EncodeResponseList(l, &cache));
  ResponseList s;
  s.shutdown = true;
  s.abort_reason = "job failed";
  Write(dir, "responses_abort", resp4 + EncodeResponseList(s, &cache));
  ResponseList control;
  Response added;
  added.op = Op::kAddProcessSet;
  added.names = {"__add_process_set__"};
  added.shapes = {{}};
  added.set_id = 3;
  added.set_ranks = {0, 2};
  control.responses.push_back(added);
  Response join;
  join.op = Op::kJoin;
  join.names = {"__join__"};
  join.shapes = {{}};
  join.last_joined = 2;
  control.responses.push_back(join);
  Write(dir, "responses_control", resp4 + EncodeResponseList(control, &cache));
  ResponseList grouped;
  Response g2;
  g2.op = Op::kAllreduce;
  g2.names = {"x", "grads_1of2", "grads_2of2"};
  g2.shapes = {{3}, {4, 4}, {8}};
  g2.groups = {TensorGroup(), {"grads_1of2", 2}, {"grads_1of2", 2}};
  grouped.responses.push_back(g2);
  Write(dir, "responses_grouped", resp4 + EncodeResponseList(grouped, &cache));
}

// handshake_fuzz plays rank 0 of 4: as server it hears rank 1's hello; as
// client it dials rank 1 and hears its reply.
void SocketSeeds(const std::string& dir) {
  auto hello_from = [](int rank) {
    HandshakeParams p;
    p.secret = "fuzz-secret";
    p.my_rank = rank;
    p.job_size = 4;
    return Captured("", [&](Socket& s) {
      (void)ClientHandshake(s, p, 1 - rank, Deadline::After(0.1));
    });
  };
  Write(dir, "server_hello_in",
        std::string(1, '\0') + hello_from(1) + std::string(32, 'm'));
  HandshakeParams server;
  server.secret = "fuzz-secret";
  server.my_rank = 1;
  server.job_size = 4;
  const std::string reply = Captured(hello_from(0), [&](Socket& s) {
    int rank;
    LinkKind kind;
    (void)ServerHandshake(s, server, Deadline::After(0.1), &rank, &kind);
  });
  Write(dir, "client_reply_in", std::string(1, '\1') + reply);
  const std::string frame = Captured("", [&](const Socket& s) {
    (void)s.WriteFrame("a control frame", Deadline::After(1));
  });
  Write(dir, "frame", std::string(1, '\2') + frame);
}

void PeerTableSeeds(const std::string& dir) {
  Write(dir, "table3",
        std::string(1, '\2') +
            "10.0.0.1:40001 node-a\n10.0.0.1:40002 node-a\n"
            "10.0.0.2:40001 node-b\n");
  Write(dir, "ipv6", std::string(1, '\0') + "[::1]:5000 host\n");
}

void ShmSeeds(const std::string& dir) {
  std::string in(1, '\1');  // 3 members
  uint64_t region = 4 << 20;
  in.append(reinterpret_cast<const char*>(&region), 8);
  std::string page(64, '\0');
  const uint64_t magic = 0x3153484d44565648ull;
  const uint32_t version = 2, members = 3;  // board bytes (24..31) 0
  std::memcpy(&page[0], &magic, 8);
  std::memcpy(&page[8], &version, 4);
  std::memcpy(&page[12], &members, 4);
  std::memcpy(&page[16], &region, 8);
  Write(dir, "header", in + page);
  Write(dir, "name", "/hvd-4242-0123456789abcdef");
}

}  // namespace
}  // namespace horovod

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  horovod::WireSeeds(root + "/wire_fuzz");
  horovod::SocketSeeds(root + "/handshake_fuzz");
  horovod::PeerTableSeeds(root + "/peer_table_fuzz");
  horovod::ShmSeeds(root + "/shm_header_fuzz");
  return 0;
}
