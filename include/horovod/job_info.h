// JobInfo: where a process stands in its job and how it finds the others,
// the input of Engine::Start (engine.h) and of the rendezvous. A plain value;
// FromEnvironment reads the environment and is safe to call from any thread.
#ifndef HOROVOD_JOB_INFO_H_
#define HOROVOD_JOB_INFO_H_

#include <horovod/status.h>

#include <string>

namespace horovod {

// How a process finds its job. FromEnvironment reads HOROVOD_* (set by
// horovodrun), then OpenMPI's OMPI_COMM_WORLD_*, then torchrun's
// RANK/WORLD_SIZE/..., and falls back to a single-process job.
struct JobInfo {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int cross_rank = 0;
  int cross_size = 1;
  // Every host holds as many ranks. The engine sets this, cross_rank and
  // cross_size from every rank's host key at the rendezvous.
  bool homogeneous = true;
  std::string controller_addr;  // rank 0's host
  int controller_port = 0;      // 0: rank 0 posts it (file or PMIx)
  // Where rank 0 posts its port and a fresh secret when controller_port is
  // 0: this file, private to the user, on one host; under mpirun across
  // hosts (rendezvous_pmix), the PMIx key named after the file.
  std::string rendezvous_file;
  bool rendezvous_pmix = false;
  std::string secret;     // the job's shared key (never logged)
  std::string bind_addr;  // interface this rank listens on
  // Identifies this rank's machine: ranks with equal keys share memory.
  // HOROVOD_HOSTNAME, else the host name plus the kernel's boot id.
  std::string host_key;
  double start_timeout_s = 30;
  // Settings every rank must share, as "NAME=value;..." (the engine fills
  // it from its knobs): rank 0 compares each rank's with its own at the
  // rendezvous and fails the job, on every rank, naming what differs.
  std::string settings;

  // `generation` counts this process's earlier inits, so that a re-init after
  // shutdown never reads a previous rendezvous.
  static Status FromEnvironment(JobInfo* out, int generation = 0);
};

}  // namespace horovod

#endif  // HOROVOD_JOB_INFO_H_
