#include "python/c_call.h"

#include <exception>

namespace nb = nanobind;

namespace horovod {

void SetErrorFromCurrentException() noexcept {
  try {
    throw;
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyObject* type = PyExc_RuntimeError;
    if (e.type() == nb::exception_type::value_error) type = PyExc_ValueError;
    if (e.type() == nb::exception_type::type_error) type = PyExc_TypeError;
    PyErr_SetString(type, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

}  // namespace horovod
