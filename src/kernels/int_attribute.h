// IntAttribute: a collective's int64 attribute (reduce op, root rank,
// process set), as frameworks store it, narrowed to the int that
// framework_api.h takes. A value outside int's range is refused by name:
// a plain cast would wrap 2^32 + 1 onto 1, a real rank, op and set, and the
// collective would run on it without a word. Header-only; no state.
#ifndef HOROVOD_KERNELS_INT_ATTRIBUTE_H_
#define HOROVOD_KERNELS_INT_ATTRIBUTE_H_

#include <cstdint>
#include <limits>
#include <string>

namespace horovod {
namespace kernels {

// The refusal of `value` (as printed) for `attribute` past int's range,
// shared with the Python layer, whose values may not fit an int64 either.
inline std::string OutOfIntRange(const char* attribute,
                                 const std::string& value) {
  return std::string(attribute) + " " + value +
         " is out of range: it must fit an int";
}

// `value` as an int in *out; false, with *error naming the attribute and
// the value, when it does not fit (the caller adds its rank: looked up only
// then, not on every call).
inline bool IntAttribute(const char* attribute, int64_t value, int* out,
                         std::string* error) {
  if (value >= std::numeric_limits<int>::min() &&
      value <= std::numeric_limits<int>::max()) {
    *out = static_cast<int>(value);
    return true;
  }
  *error = OutOfIntRange(attribute, std::to_string(value));
  return false;
}

}  // namespace kernels
}  // namespace horovod

#endif  // HOROVOD_KERNELS_INT_ATTRIBUTE_H_
