// JobInfo::FromEnvironment: recognises the launchers a Horovod user has.
#include <horovod/job_info.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <vector>

#include "common/knobs.h"
#include "rendezvous/pmix_board.h"
#include "rendezvous/slurm_lists.h"

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

std::string EnvOr(const char* name, const char* fallback_name) {
  std::string v;
  if (!EnvString(name, &v)) EnvString(fallback_name, &v);
  return v;
}

// srun's tasks: placement from SLURM_*; rank 0 is on the step's first
// node (task 0 goes there under every built-in distribution). Sets
// *needs_secret when the ranks have no way but the user's to share one.
Status FromSlurm(JobInfo* j, int generation, bool* needs_secret) {
  HVD_RETURN_IF_ERROR(RequireInt("SLURM_PROCID", &j->rank));
  std::string ntasks = EnvOr("SLURM_STEP_NUM_TASKS", "SLURM_NTASKS");
  char* end = nullptr;
  j->size = static_cast<int>(std::strtol(ntasks.c_str(), &end, 10));
  if (ntasks.empty() || *end != '\0')
    return Status::InvalidArgument(
        "srun gave this task no SLURM_STEP_NUM_TASKS or SLURM_NTASKS");
  std::vector<std::string> nodes;
  std::vector<int> tasks;
  const std::string node_list =
      EnvOr("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST");
  const std::string task_list =
      EnvOr("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE");
  HVD_RETURN_IF_ERROR(ExpandSlurmNodeList(node_list, &nodes));
  HVD_RETURN_IF_ERROR(ExpandSlurmTasksPerNode(task_list, &tasks));
  if (nodes.size() != tasks.size())
    return Status::InvalidArgument(
        "Slurm lists " + std::to_string(nodes.size()) + " nodes (" + node_list +
        ") but tasks for " + std::to_string(tasks.size()) + " (" + task_list +
        ")");
  int sum = 0;
  for (int t : tasks) sum += t;
  if (sum != j->size)
    return Status::InvalidArgument("Slurm's tasks per node (" + task_list +
                                   ") add up to " + std::to_string(sum) +
                                   ", not the step's " +
                                   std::to_string(j->size) + " tasks");
  const int node = IntOr("SLURM_NODEID", 0);
  if (node < 0 || node >= static_cast<int>(nodes.size()))
    return Status::InvalidArgument("SLURM_NODEID=" + std::to_string(node) +
                                   " is not a node of " + node_list);
  j->local_rank = IntOr("SLURM_LOCALID", 0);
  j->local_size = tasks[node];
  j->cross_rank = node;
  j->cross_size = static_cast<int>(nodes.size());
  const std::string step =
      EnvOr("SLURM_JOB_ID", "SLURM_JOBID") + "." + EnvOr("SLURM_STEP_ID", "");
  j->rendezvous_file = PrivateFile("slurm:" + step, generation);
  if (nodes.size() > 1 && !PmixBoard::Available()) {
    // No channel of Slurm's own to post an address through: rank 0
    // listens on the first node at a port both ends derive from the step.
    j->controller_addr = nodes[0];
    j->controller_port =
        20000 + static_cast<int>(std::hash<std::string>()(step) % 20000);
    *needs_secret = true;
  }
  return Status::OK();
}

}  // namespace

Status JobInfo::FromEnvironment(JobInfo* out, int generation) {
  JobInfo j;
  std::string s;
  bool from_launcher = false;
  bool needs_secret = false;
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
  } else if (EnvString("SLURM_PROCID", &s) &&
             EnvString("SLURM_STEP_ID", &s)) {  // srun (not a batch script)
    HVD_RETURN_IF_ERROR(FromSlurm(&j, generation, &needs_secret));
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
  if (needs_secret && j.secret.empty())
    return Status::InvalidArgument(
        "srun started this job on several nodes without PMIx, so the ranks "
        "share no secret: export the same HOROVOD_SECRET_KEY to every task "
        "(e.g. HOROVOD_SECRET_KEY=$(openssl rand -hex 32) srun ...), or run "
        "srun --mpi=pmix");
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
