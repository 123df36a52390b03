// PmixBoard: where rank 0 of a job started by mpirun across hosts leaves its
// address and the job's fresh secret for the other ranks, through the PMIx
// server that OpenMPI's daemons run beside every rank (the ranks' only
// channel to each other before our own links exist). libpmix is loaded at
// run time, so a build without it, or a job started some other way, never
// needs it. The board trusts what mpirun trusts: its daemons carry the value.
//
// Ownership: one per rendezvous, on the stack of the thread running it; it
// keeps the PMIx client open until destroyed (rank 0 until every rank has
// connected). Not thread-safe.
#ifndef HOROVOD_RENDEZVOUS_PMIX_BOARD_H_
#define HOROVOD_RENDEZVOUS_PMIX_BOARD_H_

#include <horovod/status.h>

#include <memory>
#include <string>

#include "common/deadline.h"

namespace horovod {

class PmixBoard {
 public:
  PmixBoard();
  ~PmixBoard();
  PmixBoard(const PmixBoard&) = delete;
  PmixBoard& operator=(const PmixBoard&) = delete;

  // Whether this process runs under a PMIx server (PMIX_RANK and a server
  // address in its environment).
  static bool Available();

  // Loads libpmix and joins the job's PMIx namespace.
  Status Open();
  // Posts key=value for every rank of the namespace to read.
  Status Publish(const std::string& key, const std::string& value);
  // Rank 0's value of key, waiting until rank 0 has posted it or the
  // deadline passes. The library's call cannot be interrupted, so it runs
  // on a helper thread that is left behind if the deadline passes first.
  Status ReadRank0(const std::string& key, Deadline deadline,
                   std::string* value);

 private:
  struct Library;
  std::shared_ptr<Library> lib_;
};

}  // namespace horovod

#endif  // HOROVOD_RENDEZVOUS_PMIX_BOARD_H_
