// Request and Response: what ranks tell the coordinator about a tensor they
// have enqueued, and what the coordinator tells every rank to execute. Plain
// values; thread-compatible.
#ifndef HOROVOD_COORDINATION_MESSAGE_H_
#define HOROVOD_COORDINATION_MESSAGE_H_

#include <horovod/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace horovod {

// Control operations travel alongside collectives but never reach users.
enum class ControlOp : uint8_t {
  kAddProcessSet = 100,
  kRemoveProcessSet = 101,
};

// The name join requests and responses travel under.
constexpr const char* kJoinTensorName = "__join__";

inline bool IsKnownOp(uint8_t op) {
  return op <= static_cast<uint8_t>(OpType::kJoin) ||
         op == static_cast<uint8_t>(ControlOp::kAddProcessSet) ||
         op == static_cast<uint8_t>(ControlOp::kRemoveProcessSet);
}

// The identity the coordinator, the cache and the queue key a tensor on: a
// name is unique per process set.
inline std::string TensorKey(int32_t process_set, const std::string& name) {
  return std::to_string(process_set) + ":" + name;
}

struct Request {
  int32_t rank = 0;
  uint8_t op = 0;  // OpType or ControlOp
  std::string name;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;
  int32_t device = -1;
  int32_t process_set = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<int64_t> shape;   // kAddProcessSet: the member ranks
  std::vector<int64_t> splits;  // alltoall
  int32_t group_size = 0;       // > 0: negotiated with the rest of `group`
  std::string group;

  std::string Key() const { return TensorKey(process_set, name); }
};

struct RequestList {
  uint64_t epoch = 0;  // response lists the sender had executed
  bool shutdown = false;
  std::vector<Request> requests;
  std::vector<uint32_t> cache_hits;  // response-cache slots, in enqueue order
  std::string abort_reason;          // non-empty: the sender hit a fatal error
  // Set when the operations the sender's threads are blocked waiting on
  // changed since its last list; `waiting` then holds their keys (empty:
  // nothing waits). Rank 0 uses it to tell ranks that can never meet
  // (a deadlock) from ranks that are merely slow.
  bool waiting_update = false;
  std::vector<std::string> waiting;
};

struct Response {
  uint8_t op = 0;
  bool error = false;
  std::string error_message;
  std::vector<std::string> names;  // several when fused
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;
  int32_t device = -1;
  int32_t process_set = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::vector<std::vector<int64_t>> shapes;  // per name (from the first rank)
  // allgather: dim 0 of every member, per name ([name][member] flattened);
  // alltoall: the split matrix [sender][receiver]; join: {last joined rank};
  // process-set ops: {id, ranks...}.
  std::vector<int64_t> sizes;
};

struct ResponseList {
  bool shutdown = false;
  std::vector<Response> responses;
  // Cache hits that arrived after their slot changed: (rank, slot). That
  // rank sends the full request again.
  std::vector<std::pair<int32_t, uint32_t>> stale_hits;
  std::string abort_reason;  // non-empty: the job is failing; stop with this
  // The autotuner's new small/large allreduce crossover, applied by every
  // rank before this list's responses; -1: unchanged.
  int64_t small_allreduce_bytes = -1;
};

// Lower-case name of a request's op: an OpType or a ControlOp.
const char* OpName(uint8_t op);
// The same in upper case, as timeline spans show it.
std::string UpperOpName(uint8_t op);
// The response that executes `r` alone (member sizes not filled in).
Response ResponseFor(const Request& r);
// The request a rank sends for tensor `i` of `resp`.
Request RequestFor(const Response& resp, size_t i, int rank);

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_MESSAGE_H_
