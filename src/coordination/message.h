// Request and Response: what ranks tell the coordinator about a tensor they
// have enqueued, and what the coordinator tells every rank to execute. Plain
// values; thread-compatible.
#ifndef HOROVOD_COORDINATION_MESSAGE_H_
#define HOROVOD_COORDINATION_MESSAGE_H_

#include <horovod/types.h>

#include <charconv>
#include <cstdint>
#include <string>
#include <vector>

namespace horovod {

// Every operation a request or response carries: the ones users start (the
// values of OpType, so one converts to the other by value) and the control
// operations that travel alongside them but never reach users. The values
// are the wire's.
enum class Op : uint8_t {
  kAllreduce = 0,
  kAllgather = 1,
  kBroadcast = 2,
  kAlltoall = 3,
  kReducescatter = 4,
  kBarrier = 5,
  kJoin = 6,
  kAddProcessSet = 100,
  kRemoveProcessSet = 101,
};

constexpr Op ToOp(OpType t) { return static_cast<Op>(t); }
static_assert(ToOp(OpType::kReducescatter) == Op::kReducescatter &&
                  ToOp(OpType::kJoin) == Op::kJoin,
              "Op extends OpType value for value");

// Whether a byte off the wire names an Op.
inline bool IsKnownOp(uint8_t op) {
  return op <= static_cast<uint8_t>(Op::kJoin) ||
         op == static_cast<uint8_t>(Op::kAddProcessSet) ||
         op == static_cast<uint8_t>(Op::kRemoveProcessSet);
}

// Whether `op` moves tensor data (the others only synchronize).
inline bool MovesData(Op op) { return op <= Op::kReducescatter; }

// The name join requests and responses travel under.
constexpr const char* kJoinTensorName = "__join__";

// The identity the coordinator, the cache and the queue key a tensor on: a
// name is unique per process set. Written into `*key`, whose capacity a
// caller that looks up one tensor after another reuses instead of
// allocating a key per lookup; the second form returns a fresh string.
inline const std::string& TensorKey(int32_t process_set,
                                    const std::string& name, std::string* key) {
  key->clear();
  char digits[16];
  const auto end =
      std::to_chars(digits, digits + sizeof(digits), process_set).ptr;
  key->append(digits, end);
  key->push_back(':');
  key->append(name);
  return *key;
}
inline std::string TensorKey(int32_t process_set, const std::string& name) {
  std::string key;
  TensorKey(process_set, name, &key);
  return key;
}

// The group a tensor was submitted in (a grouped collective): the
// coordinator releases a group only whole. size 0: not grouped.
struct TensorGroup {
  std::string name;
  int32_t size = 0;
  bool operator==(const TensorGroup& o) const {
    return size == o.size && name == o.name;
  }
  bool operator!=(const TensorGroup& o) const { return !(*this == o); }
};

// The scalars first, then the name and the shape: what a steady step
// compares with a resubmission lies in the first two cache lines.
struct Request {
  int32_t rank = 0;
  Op op = Op::kAllreduce;
  DataType dtype = DataType::kFloat32;
  ReduceOp reduce_op = ReduceOp::kSum;
  int32_t root = 0;  // broadcast: the global rank that sends
  int32_t device = -1;
  int32_t process_set = 0;
  int32_t group_size = 0;  // > 0: negotiated with the rest of `group`
  // kRemoveProcessSet: the set to remove (kAddProcessSet: set_ranks).
  int32_t set_id = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  std::string name;
  std::vector<int64_t> shape;
  std::vector<int64_t> splits;  // alltoall
  std::string group;
  // kAddProcessSet: the ranks of the set to add, ascending.
  std::vector<int32_t> set_ranks;
  // Non-empty: the sender refused its own input for this operation, for
  // this reason. Rank 0 fails the operation on every member with it, so
  // that none waits for a tensor that will not come.
  std::string refusal;

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
  Op op = Op::kAllreduce;
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
  // allgather: dim 0 of every member; alltoall: the split matrix
  // [sender][receiver] flattened.
  std::vector<int64_t> sizes;
  // Process-set ops: the set added or removed; kAddProcessSet: its ranks.
  int32_t set_id = 0;
  std::vector<int32_t> set_ranks;
  int32_t last_joined = -1;  // join: the last rank to join
  // Per name, when any of them was submitted in a group; empty otherwise
  // (GroupOf reads it either way).
  std::vector<TensorGroup> groups;
  // Not on the wire: each tensor's response-cache slot when the response
  // travels as slots (set by the encoder's caller and by the decoder), so
  // executing it refreshes the cache by slot.
  std::vector<uint32_t> slots;
};

// The group of tensor `i` of `r` (size 0 when not grouped).
TensorGroup GroupOf(const Response& r, size_t i);
// Appends tensor `i` of `from` (name, shape, group) to `to`; the second
// form moves them out of `from`.
void AddTensor(Response* to, const Response& from, size_t i);
void AddTensor(Response* to, Response&& from, size_t i);
// Names and shapes that responses refilled in place no longer hold, kept
// with their capacity for the next tensors placed: lists whose responses
// change size from one step to the next (a fused step, then a small
// allreduce, then a barrier) then allocate nothing either.
struct TensorSpares {
  // Kept at most: lists built from responses that bring their own strings
  // (rank 0's uncached ones) shed more than they take back.
  static constexpr size_t kMax = 1 << 14;
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
};
// Writes `c`, a single-tensor cached entry, as tensor `k` of `out`
// (0 <= k <= its tensors so far) with its cache slot, into the strings and
// vectors a response refilled in place kept from its last use (or, past
// those, into `spares`), so a steady step allocates nothing; TrimTensors
// then moves what is left past the last tensor into `spares`.
void PlaceTensor(Response* out, size_t k, const Response& c, uint32_t slot,
                 TensorSpares* spares);
// PlaceTensor without the name: for a response executed on entries its
// caller claimed by address, which reads names only to trace them. Its
// tensors are then counted by its shapes; its names stay empty.
void PlaceShape(Response* out, size_t k, const Response& c, uint32_t slot,
                TensorSpares* spares);
void TrimTensors(Response* r, size_t n, TensorSpares* spares);
// Gives `r` at least `n` names and shapes, the new ones from `spares`
// while it has any.
void GrowTensors(Response* r, size_t n, TensorSpares* spares);
// Shrinks `responses` to `n`, the dropped responses' tensors moved into
// `spares` first.
void TrimResponses(std::vector<Response>* responses, size_t n,
                   TensorSpares* spares);
// Gives `to` the op and parameters of `from`, without error, member sizes or
// process-set fields; its names, shapes, groups and slots are left as they
// are (a caller refilling a response in place keeps their capacity).
void AssignParams(Response* to, const Response& from);
// Bytes of a tensor of `dtype` and `shape`.
int64_t TensorBytes(DataType dtype, const std::vector<int64_t>& shape);
// The fusion rule (the coordinator's, and the ready board's): the response
// among out[0, sizes.size()) that `r`, one tensor of `bytes`, joins, or -1
// when it goes on its own. Only allreduces without error that are alike in
// everything but names and shapes fuse, up to `threshold` bytes in all
// (`sizes[i]`: what out[i] holds already); none when `threshold` <= 0.
int FusionTarget(const std::vector<Response>& out,
                 const std::vector<int64_t>& sizes, const Response& r,
                 int64_t bytes, int64_t threshold);

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
  // Not on the wire: what decoding into this list in place keeps for the
  // next one (TensorSpares).
  TensorSpares spares;
};

// Lower-case name of an op, as errors show it.
const char* OpName(Op op);
// The same in upper case, as timeline spans show it.
std::string UpperOpName(Op op);
// The response that executes `r` alone (member sizes not filled in).
Response ResponseFor(const Request& r);
// The request a rank sends for tensor `i` of `resp`.
Request RequestFor(const Response& resp, size_t i, int rank);

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_MESSAGE_H_
