#include "python/py_number.h"

#include <climits>
#include <string>

#include "kernels/int_attribute.h"

namespace nb = nanobind;

namespace horovod {

namespace {

std::string Repr(nb::handle value) {
  nb::object r = nb::steal(PyObject_Repr(value.ptr()));
  if (!r.is_valid()) {
    PyErr_Clear();
    return "<unprintable>";
  }
  return nb::borrow<nb::str>(r).c_str();
}

// Where no engine is bound yet (a graph traced before init), no rank.
std::string OnRank(int rank) {
  return rank < 0 ? "" : " (rank " + std::to_string(rank) + ")";
}

int Integer(nb::handle value, const char* what, int rank) {
  PyObject* o = value.ptr();
  nb::object index;
  if (!PyLong_CheckExact(o)) {
    if (PyFloat_Check(o) || !PyIndex_Check(o))
      throw nb::type_error((std::string(what) + " must be an integer, got " +
                            Repr(value) + OnRank(rank))
                               .c_str());
    index = nb::steal(PyNumber_Index(o));
    if (!index.is_valid()) throw nb::python_error();
    o = index.ptr();
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) throw nb::python_error();
  if (overflow != 0 || v < INT_MIN || v > INT_MAX)
    throw nb::value_error(
        (kernels::OutOfIntRange(what, Repr(o)) + OnRank(rank)).c_str());
  return static_cast<int>(v);
}

double Real(nb::handle value, const char* what, int rank) {
  PyObject* o = value.ptr();
  if (PyFloat_CheckExact(o)) return PyFloat_AS_DOUBLE(o);
  const double v = PyFloat_AsDouble(o);  // __float__, then __index__
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    throw nb::type_error((std::string(what) + " must be a number, got " +
                          Repr(value) + OnRank(rank))
                             .c_str());
  }
  return v;
}

}  // namespace

PyNumbers PyNumbers::From(nb::handle reduce_op, nb::handle prescale,
                          nb::handle postscale, nb::handle root, int rank) {
  PyNumbers n;
  n.reduce_op = Integer(reduce_op, "reduce op", rank);
  n.prescale = Real(prescale, "prescale factor", rank);
  n.postscale = Real(postscale, "postscale factor", rank);
  n.root = Integer(root, "root rank", rank);
  return n;
}

}  // namespace horovod
