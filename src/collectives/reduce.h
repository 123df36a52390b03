// Element-wise kernels used by every reduction: dst = dst (op) src, the
// same from two operands into a third buffer, and in-place scaling.
// float16/bfloat16 are computed in float32 and rounded to nearest-even.
// Pure functions; thread-safe.
#ifndef HOROVOD_COLLECTIVES_REDUCE_H_
#define HOROVOD_COLLECTIVES_REDUCE_H_

#include <horovod/types.h>

#include <cstddef>
#include <cstdint>

namespace horovod {

// op is Sum, Min, Max or Product (Average is Sum plus a postscale). For bool,
// Sum and Max are logical or, Min and Product logical and.
void ReduceInto(void* dst, const void* src, int64_t count, DataType dtype,
                ReduceOp op);
// dst = a (op) b: an out-of-place operand reduced in one pass instead of a
// copy and then ReduceInto. `dst` may be `a`; otherwise none of the three
// may overlap.
void ReduceOf(void* dst, const void* a, const void* b, int64_t count,
              DataType dtype, ReduceOp op);
// ReduceOf, then each result scaled by `factor` as ScaleBuffer would, and
// also stored to `copy` when it is not null: the pass that finishes a block
// of an allreduce and publishes it to the peers, with the same results as
// the three steps apart. `copy` overlaps none of the others.
void ReduceOfScaled(void* dst, void* copy, const void* a, const void* b,
                    int64_t count, DataType dtype, ReduceOp op, double factor);
// x = x * factor; integers are computed in double and truncated.
void ScaleBuffer(void* buf, int64_t count, DataType dtype, double factor);
// memcpy with stores that bypass the cache, for a large destination nobody
// reads soon: writing a line that is not in cache otherwise reads it from
// memory first. Its stores are fenced before it returns. `dst` and `src`
// do not overlap.
void StreamCopy(void* dst, const void* src, size_t bytes);

uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBFloat16(float f);
float BFloat16ToFloat(uint16_t h);

}  // namespace horovod

#endif  // HOROVOD_COLLECTIVES_REDUCE_H_
