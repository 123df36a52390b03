// PyNumbers: the numbers a Python caller passes to a collective (reduce op,
// scale factors, root rank), converted as the engine takes them, by kind
// and range, for every adapter: int() would take a root of 1.5 as rank 1,
// a cast would wrap 2**32 + 1 onto rank 1, and nanobind's own casters
// answer a float op with a dump of the binding's signature. Stateless;
// callers hold the GIL.
#ifndef HOROVOD_PYTHON_PY_NUMBER_H_
#define HOROVOD_PYTHON_PY_NUMBER_H_

#include <nanobind/nanobind.h>

namespace horovod {

struct PyNumbers {
  int reduce_op = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  int root = 0;

  // Integers are Python's ints and anything with __index__ (NumPy's
  // integers, a 0-dim integer tensor), floats not; reals are ints, floats
  // and anything with __float__ (a 0-dim tensor), strings not. Throws
  // TypeError for a value of another kind and ValueError for an integer
  // past int's range, each naming the argument, the value and `rank`
  // (unless negative: no engine yet).
  static PyNumbers From(nanobind::handle reduce_op, nanobind::handle prescale,
                        nanobind::handle postscale, nanobind::handle root,
                        int rank);
};

}  // namespace horovod

#endif  // HOROVOD_PYTHON_PY_NUMBER_H_
