// The public C++ API end to end: three engines in one process (one per
// thread), joined over real authenticated TCP links.
#include <gtest/gtest.h>
#include <horovod/engine.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace horovod {
namespace {

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

JobInfo Job(int rank, int size, int port, const std::string& secret) {
  JobInfo j;
  j.rank = rank;
  j.size = size;
  j.local_rank = rank;
  j.local_size = size;
  j.controller_addr = "127.0.0.1";
  j.bind_addr = "127.0.0.1";
  j.controller_port = port;
  j.secret = secret;
  j.start_timeout_s = 20;
  return j;
}

TEST(Engine, CollectivesMismatchAndShutdown) {
  const int n = 3, port = FreePort();
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      std::unique_ptr<Engine> e;
      Status st = Engine::Start(Job(r, n, port, "test-secret"), &e);
      if (!st.ok()) {
        failures[r] = st.ToString();
        return;
      }
      std::vector<float> v(1000, float(r + 1));
      TensorView t{v.data(), DataType::kFloat32, {1000}};
      CollectiveArgs args;
      args.name = "v";
      args.op = ReduceOp::kAverage;
      Handle h;
      if (!e->Allreduce(t, args, &h).ok() || !h.Wait(30).ok() || v[999] != 2.0f)
        failures[r] += "allreduce;";
      std::vector<int32_t> g(r, r);
      TensorView gt{g.data(), DataType::kInt32, {r}};
      args.name = "g";
      if (!e->Allgather(gt, args, &h).ok() || !h.Wait(30).ok() ||
          h.output_shape() != std::vector<int64_t>{3} ||
          static_cast<int32_t*>(h.output()->data())[2] != 2)
        failures[r] += "allgather;";
      std::vector<double> bad(r + 1, 1.0);
      TensorView bt{bad.data(), DataType::kFloat64, {r + 1}};
      args.name = "bad";
      if (!e->Allreduce(bt, args, &h).ok() ||
          h.Wait(30).code() != StatusCode::kMismatch)
        failures[r] += "mismatch;";
      if (!e->Barrier().ok()) failures[r] += "barrier;";
      if (!e->Shutdown().ok()) failures[r] += "shutdown;";
    });
  }
  for (auto& t : ranks) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

TEST(Engine, WrongSecretIsRefused) {
  const int port = FreePort();
  Status st0, st1;
  std::thread a([&] {
    JobInfo j = Job(0, 2, port, "right");
    j.start_timeout_s = 3;
    std::unique_ptr<Engine> e;
    st0 = Engine::Start(j, &e);
  });
  std::thread b([&] {
    JobInfo j = Job(1, 2, port, "wrong");
    j.start_timeout_s = 3;
    std::unique_ptr<Engine> e;
    st1 = Engine::Start(j, &e);
  });
  a.join();
  b.join();
  EXPECT_FALSE(st0.ok());
  EXPECT_FALSE(st1.ok());
  EXPECT_NE(st0.message().find("did not connect"), std::string::npos)
      << st0.message();
}

}  // namespace
}  // namespace horovod
