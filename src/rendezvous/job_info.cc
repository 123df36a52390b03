// JobInfo::FromEnvironment: recognises the launchers a Horovod user has.
#include <horovod/job_info.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>

#include "common/knobs.h"
#include "rendezvous/pmix_board.h"

namespace horovod {
namespace {

Status RequireInt(const char* name, int* out) {
  int64_t v;
  if (!EnvInt(name, &v))
    return Status::InvalidArgument(std::string(name) +
                                   " is missing or not an integer");
  *out = static_cast<int>(v);
  return Status::OK();
}

int IntOr(const char* name, int fallback) {
  int64_t v;
  return EnvInt(name, &v) ? static_cast<int>(v) : fallback;
}

// Two containers can share a host name but not memory; the boot id tells
// kernels apart.
std::string DetectHostKey() {
  std::string key;
  if (EnvString("HOROVOD_HOSTNAME", &key)) return key;
  char name[256] = {0};
  gethostname(name, sizeof(name) - 1);
  key = name;
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (boot >> id) key += "/" + id;
  return key;
}

std::string PrivateFile(const std::string& key, int generation) {
  size_t h = std::hash<std::string>()(key);
  std::string dir = "/tmp";
  EnvString("TMPDIR", &dir);
  return dir + "/horovod-rdzv-" + std::to_string(getuid()) + "-" +
         std::to_string(h) + "-" + std::to_string(generation);
}

}  // namespace

Status JobInfo::FromEnvironment(JobInfo* out, int generation) {
  JobInfo j;
  std::string s;
  bool from_launcher = false;
  if (EnvString("HOROVOD_RANK", &s)) {  // horovodrun (or a user's own)
    HVD_RETURN_IF_ERROR(RequireInt("HOROVOD_RANK", &j.rank));
    HVD_RETURN_IF_ERROR(RequireInt("HOROVOD_SIZE", &j.size));
    j.local_rank = IntOr("HOROVOD_LOCAL_RANK", j.rank);
    j.local_size = IntOr("HOROVOD_LOCAL_SIZE", j.size);
    j.cross_rank = IntOr("HOROVOD_CROSS_RANK", 0);
    j.cross_size = IntOr("HOROVOD_CROSS_SIZE", 1);
    from_launcher = true;
  } else if (EnvString("OMPI_COMM_WORLD_RANK", &s)) {  // mpirun (OpenMPI)
    HVD_RETURN_IF_ERROR(RequireInt("OMPI_COMM_WORLD_RANK", &j.rank));
    HVD_RETURN_IF_ERROR(RequireInt("OMPI_COMM_WORLD_SIZE", &j.size));
    j.local_rank = IntOr("OMPI_COMM_WORLD_LOCAL_RANK", j.rank);
    j.local_size = IntOr("OMPI_COMM_WORLD_LOCAL_SIZE", j.size);
    j.cross_size = j.local_size > 0 ? j.size / j.local_size : 1;
    j.cross_rank = j.local_size > 0 ? j.rank / j.local_size : 0;
    std::string id;
    if (!EnvString("PMIX_NAMESPACE", &id) &&
        !EnvString("OMPI_MCA_ess_base_jobid", &id))
      EnvString("OMPI_MCA_orte_hnp_uri", &id);
    j.rendezvous_file = PrivateFile("ompi:" + id, generation);
  } else if (EnvString("RANK", &s) &&
             EnvString("WORLD_SIZE", &s)) {  // torchrun
    HVD_RETURN_IF_ERROR(RequireInt("RANK", &j.rank));
    HVD_RETURN_IF_ERROR(RequireInt("WORLD_SIZE", &j.size));
    j.local_rank = IntOr("LOCAL_RANK", j.rank);
    j.local_size = IntOr("LOCAL_WORLD_SIZE", j.size);
    j.cross_rank = IntOr("GROUP_RANK", 0);
    j.cross_size = j.local_size > 0 ? j.size / j.local_size : 1;
    std::string run_id = "none", port = "0";
    EnvString("TORCHELASTIC_RUN_ID", &run_id);
    EnvString("MASTER_PORT", &port);
    j.rendezvous_file = PrivateFile("torch:" + run_id + ":" + port, generation);
    if (j.local_size != j.size) {
      // Several hosts: rank 0 listens next to torchrun's own store port.
      EnvString("MASTER_ADDR", &j.controller_addr);
      j.controller_port = IntOr("MASTER_PORT", 29500) + 1;
    }
  }
  if (j.size < 1 || j.rank < 0 || j.rank >= j.size)
    return Status::InvalidArgument("invalid rank " + std::to_string(j.rank) +
                                   " for size " + std::to_string(j.size));
  if (j.local_size < 1 || j.local_rank < 0 || j.local_rank >= j.local_size)
    return Status::InvalidArgument(
        "invalid local rank " + std::to_string(j.local_rank) +
        " for local size " + std::to_string(j.local_size));
  // Explicit settings override what the launcher implied.
  if (EnvString("HOROVOD_CONTROLLER_ADDR", &s)) j.controller_addr = s;
  int64_t port;
  if (EnvInt("HOROVOD_CONTROLLER_PORT", &port)) {
    if (port <= 0 || port > 65535)
      return Status::InvalidArgument(
          "HOROVOD_CONTROLLER_PORT=" + std::to_string(port) + " is not a port");
    j.controller_port = static_cast<int>(port);
  }
  if (from_launcher && j.controller_port == 0 && j.size > 1)
    return Status::InvalidArgument("HOROVOD_CONTROLLER_PORT is not set for a " +
                                   std::to_string(j.size) +
                                   "-rank job (launch with horovodrun)");
  if (!j.rendezvous_file.empty() && j.controller_port == 0 &&
      j.local_size != j.size) {
    // Ranks on several hosts share no file: rank 0 posts through PMIx.
    if (!PmixBoard::Available())
      return Status::InvalidArgument(
          "this job spans hosts but names no rank 0: set "
          "HOROVOD_CONTROLLER_ADDR, HOROVOD_CONTROLLER_PORT and "
          "HOROVOD_SECRET_KEY, launch with horovodrun, or use an mpirun "
          "with PMIx");
    j.rendezvous_pmix = true;
  }
  EnvString("HOROVOD_SECRET_KEY", &j.secret);
  EnvString("HOROVOD_BIND_ADDR", &j.bind_addr);
  if (j.bind_addr.empty() && j.local_size == j.size) j.bind_addr = "127.0.0.1";
  if (j.controller_addr.empty() && j.local_size == j.size)
    j.controller_addr = "127.0.0.1";
  j.host_key = DetectHostKey();
  double t;
  if (EnvDouble("HOROVOD_START_TIMEOUT", &t) && t > 0) j.start_timeout_s = t;
  *out = j;
  return Status::OK();
}

}  // namespace horovod
