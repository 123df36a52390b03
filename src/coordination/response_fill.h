// ResponseFill: builds a response list's responses by the fusion rule, in
// place of the responses the last list left in the same vector. A steady
// step fuses the same tensors as the last one, so the names, shapes and
// slots it writes go into strings and vectors that already have room (or
// that earlier lists left spare): nothing is allocated. Used by rank 0's
// coordinator; one thread.
#ifndef HOROVOD_COORDINATION_RESPONSE_FILL_H_
#define HOROVOD_COORDINATION_RESPONSE_FILL_H_

#include <cstdint>
#include <vector>

#include "coordination/message.h"

namespace horovod {

class ResponseFill {
 public:
  // Starts refilling `out`; `threshold` as FusionTarget's.
  void Begin(std::vector<Response>* out, int64_t threshold);
  // Adds `r` (one tensor, or a response that never fuses: an error, a
  // control operation), joined to an earlier response when the fusion rule
  // allows. `slot`: the tensor's cache slot, or -1.
  void Add(Response&& r, int slot);
  // Adds the tensor of `c`, a single-tensor cached entry, under `slot`.
  void AddCached(const Response& c, uint32_t slot);
  // Ends the list: trims each response to its tensors. A response keeps
  // its slots only when every tensor in it has one (it then travels as
  // slots).
  void Finish();

 private:
  // Starts a response of `bytes`, reusing an element the last list left.
  Response& Start(int64_t bytes);

  std::vector<Response>* out_ = nullptr;
  int64_t threshold_ = 0;
  // Per response so far: fused bytes (FusionTarget's sizes), tensors, and
  // whether each has a slot.
  std::vector<int64_t> bytes_;
  std::vector<size_t> counts_;
  std::vector<char> slotted_;
  TensorSpares spares_;  // what the lists so far no longer hold
};

}  // namespace horovod

#endif  // HOROVOD_COORDINATION_RESPONSE_FILL_H_
