// What the module's plain CPython functions share (those written without
// nanobind's dispatch because a training loop calls them once per tensor):
// turning a C++ exception into the Python error nanobind's bindings would
// raise. Stateless; called holding the GIL.
#ifndef HOROVOD_PYTHON_C_CALL_H_
#define HOROVOD_PYTHON_C_CALL_H_

#include <nanobind/nanobind.h>

namespace horovod {

// Sets the Python error for the exception being handled: a Python error
// as it is, nanobind's ValueError and TypeError as those, anything else as
// RuntimeError. Call only inside a catch block.
void SetErrorFromCurrentException() noexcept;

// Runs `body` (a new reference, or null with an error set) and returns what
// it returns, or null with the error set for an exception it throws.
template <typename Body>
PyObject* CallTranslatingExceptions(Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    SetErrorFromCurrentException();
    return nullptr;
  }
}

}  // namespace horovod

#endif  // HOROVOD_PYTHON_C_CALL_H_
