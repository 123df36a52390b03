// Rendezvous: turns a JobInfo into live, authenticated connections. Rank 0
// listens at the controller address; every worker connects there (a control
// link), reports where its own listener is, receives everyone's, and then the
// ranks build a full mesh of data links (rank j dials every i < j). Listeners
// close when the mesh is complete, so nothing listens during training.
// Every step is bounded by JobInfo::start_timeout_s.
#ifndef HOROVOD_RENDEZVOUS_RENDEZVOUS_H_
#define HOROVOD_RENDEZVOUS_RENDEZVOUS_H_

#include <horovod/job_info.h>

#include <vector>

#include "net/socket.h"

namespace horovod {

struct Mesh {
  std::vector<Socket> data;        // by peer rank; invalid at our own rank
  std::vector<Socket> control;     // rank 0: by worker rank; worker: [0]
  std::vector<std::string> hosts;  // every rank's JobInfo::host_key
};

Status EstablishMesh(const JobInfo& job, Mesh* out);

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_RENDEZVOUS_H_
