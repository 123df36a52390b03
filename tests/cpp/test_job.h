// Jobs for the multi-rank suites: a free loopback port for rank 0's
// listener and the JobInfo of one rank of a single-host job on it.
#ifndef HOROVOD_TESTS_CPP_TEST_JOB_H_
#define HOROVOD_TESTS_CPP_TEST_JOB_H_

#include <horovod/engine.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace horovod {

// The port is released before use; another process could take it first,
// which on a test machine is rare enough.
inline int FreePort() {
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

inline JobInfo LoopbackJob(int rank, int size, int port,
                           const std::string& secret) {
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

}  // namespace horovod

#endif  // HOROVOD_TESTS_CPP_TEST_JOB_H_
