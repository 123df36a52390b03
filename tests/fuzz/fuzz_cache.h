// The response cache wire_fuzz decodes against, shared with make_seeds so
// that seeds with slot-compressed responses decode.
#ifndef HOROVOD_TESTS_FUZZ_FUZZ_CACHE_H_
#define HOROVOD_TESTS_FUZZ_FUZZ_CACHE_H_

#include "coordination/response_cache.h"

namespace horovod {

inline void FillFuzzCache(ResponseCache* cache) {
  Response r;
  r.op = Op::kAllreduce;
  r.names = {"a", "b", "layer.weight"};
  r.shapes = {{4}, {2, 3}, {}};
  for (size_t i = 0; i < r.names.size(); ++i) cache->Put(r, i, 1);
}

}  // namespace horovod

#endif  // HOROVOD_TESTS_FUZZ_FUZZ_CACHE_H_
