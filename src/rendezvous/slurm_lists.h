// Slurm's compressed lists, as srun hands them to each task:
// SLURM_JOB_NODELIST / SLURM_STEP_NODELIST ("gpu[01-03,07],login5") and
// SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE ("2(x3),1"). Pure
// functions over strings; the engine reads the environment elsewhere.
#ifndef HOROVOD_RENDEZVOUS_SLURM_LISTS_H_
#define HOROVOD_RENDEZVOUS_SLURM_LISTS_H_

#include <horovod/status.h>

#include <string>
#include <vector>

namespace horovod {

// Host names in order: "a[1-3,05]b,c" -> a1b a2b a3b a05b c (zero padding
// of a range's lower bound kept). At most kMaxSlurmNodes names.
Status ExpandSlurmNodeList(const std::string& list,
                           std::vector<std::string>* out);

// Tasks on each node in order: "2(x3),1" -> 2 2 2 1.
Status ExpandSlurmTasksPerNode(const std::string& list, std::vector<int>* out);

constexpr size_t kMaxSlurmNodes = 1 << 16;

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_SLURM_LISTS_H_
