// Adasum: adaptive summation of gradients (op=Adasum), an allreduce over a
// power-of-two number of members. Two vectors combine as
//
//   adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// a sum when they are orthogonal, their average when they are equal; a side
// whose squared norm is below 1e-8 keeps coefficient 1. Members combine in a
// binary tree by index ({0,1}, {2,3}, then {0..1, 2..3}, ...), the lower
// half's vector always as `a`, and every tensor of a fused buffer gets its
// own coefficients, from dot products and norms over the whole tensor.
//
// The data path is recursive doubling over whole vectors: at distance d a
// member swaps its vector with member (index ^ d), and both compute the same
// combination of the same two operands, so every member ends bit-identical.
// log2(n) exchanges of the whole buffer, through the transport.
//
// Pure functions over a Communicator; thread-safety as the Communicator's.
#ifndef HOROVOD_COLLECTIVES_ADASUM_H_
#define HOROVOD_COLLECTIVES_ADASUM_H_

#include <horovod/types.h>

#include <cstdint>
#include <vector>

#include "collectives/communicator.h"

namespace horovod {

// The dtypes Adasum combines: float16, bfloat16, float32, float64.
bool AdasumSupports(DataType dtype);

// dst = adasum(a, b) over `count` elements; dst may be a or b. Sums are
// taken in double; float16 and bfloat16 round to nearest-even.
void AdasumCombine(const void* a, const void* b, void* dst, int64_t count,
                   DataType dtype);

// In place over `buf`, which holds consecutive tensors of counts[i]
// elements. comm.size() must be a power of two and dtype supported (the
// engine checks both when the tensor is enqueued).
Status AdasumAllreduce(Communicator& comm, void* buf,
                       const std::vector<int64_t>& counts, DataType dtype);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_ADASUM_H_
