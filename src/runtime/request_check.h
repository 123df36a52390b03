// CheckRequest: what the engine refuses when a tensor is enqueued, before
// anything is sent: devices and shapes it cannot take, ops a dtype or a
// reduction cannot do, roots and splits that do not fit the process set.
// Every error names the value, the rank and the tensor, and is raised on
// each rank that makes the call. Pure; thread-safe.
#ifndef HOROVOD_RUNTIME_REQUEST_CHECK_H_
#define HOROVOD_RUNTIME_REQUEST_CHECK_H_

#include <horovod/engine.h>

#include <vector>

#include "coordination/message.h"

namespace horovod {

// `members` are the process set's global ranks, `rank` ours, `r` the
// request being built (its name is used in errors; alltoall's splits are
// filled in, even ones when none were given).
Status CheckRequest(OpType op, const TensorView& t, const CollectiveArgs& args,
                    const std::vector<int>& members, int rank, Request* r);

}  // namespace horovod

#endif  // HOROVOD_RUNTIME_REQUEST_CHECK_H_
