#include "python/table_methods.h"

#include <cstdint>

#include "python/c_call.h"
#include "python/handle_table.h"

namespace nb = nanobind;

namespace horovod {
namespace {

// The one argument `handle` (positional or by keyword) as a handle number;
// false with a TypeError set when the call does not fit `method`(handle)
// or the handle is not an int.
bool HandleNumber(const char* method, PyObject* const* args, Py_ssize_t nargs,
                  PyObject* kwnames, int64_t* out) {
  PyObject* arg = nullptr;
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  if (nargs == 1 && nkw == 0) {
    arg = args[0];
  } else if (nargs == 0 && nkw == 1 &&
             PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0),
                                              "handle") == 0) {
    arg = args[0];
  } else if (nargs + nkw == 1) {
    PyErr_Format(PyExc_TypeError,
                 "%s() got an unexpected keyword argument '%U'", method,
                 PyTuple_GET_ITEM(kwnames, 0));
    return false;
  } else {
    PyErr_Format(PyExc_TypeError,
                 "%s() takes one argument, the handle (%zd given)", method,
                 nargs + nkw);
    return false;
  }
  if (PyLong_CheckExact(arg)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(arg, &overflow);
    if (overflow == 0 && !(v == -1 && PyErr_Occurred())) {
      *out = v;
      return true;
    }
    PyErr_Clear();
  } else if (!PyFloat_Check(arg) && PyIndex_Check(arg)) {
    nb::object index = nb::steal(PyNumber_Index(arg));
    if (index.is_valid()) {
      PyObject* as_int = index.ptr();
      return HandleNumber(method, &as_int, 1, nullptr, out);
    }
    PyErr_Clear();
  }
  PyErr_Format(PyExc_TypeError,
               "%s(): the handle must be an int that an async call returned, "
               "got %R",
               method, arg);
  return false;
}

// The table behind `self` (an instance of the bound class, which the method
// descriptor checks), or null with a TypeError set when it was never
// initialized (made by __new__ alone).
HandleTable* TableOf(PyObject* self, const char* method) {
  if (nb::inst_ready(self)) return nb::inst_ptr<HandleTable>(self);
  PyErr_Format(PyExc_TypeError, "%s() on a HandleTable never initialized",
               method);
  return nullptr;
}

PyObject* Poll(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
               PyObject* kwnames) {
  int64_t number;
  HandleTable* table = TableOf(self, "poll");
  if (table == nullptr || !HandleNumber("poll", args, nargs, kwnames, &number))
    return nullptr;
  return CallTranslatingExceptions(
      [&] { return nb::bool_(table->Poll(number)).release().ptr(); });
}

PyObject* Synchronize(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                      PyObject* kwnames) {
  int64_t number;
  HandleTable* table = TableOf(self, "synchronize");
  if (table == nullptr ||
      !HandleNumber("synchronize", args, nargs, kwnames, &number))
    return nullptr;
  return CallTranslatingExceptions(
      [&] { return table->Synchronize(number).release().ptr(); });
}

// CPython's calling convention for METH_FASTCALL | METH_KEYWORDS, stored as
// a PyCFunction (through void(*)(), the usual cast).
template <typename Fn>
PyCFunction AsPyCFunction(Fn* fn) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn));
}

PyMethodDef kTableMethods[] = {
    {"poll", AsPyCFunction(Poll), METH_FASTCALL | METH_KEYWORDS,
     "poll(handle)\n\nTrue if the operation behind `handle` has finished; "
     "ValueError for a handle that is unknown or already synchronized."},
    {"synchronize", AsPyCFunction(Synchronize), METH_FASTCALL | METH_KEYWORDS,
     "synchronize(handle)\n\nWaits for the operation behind `handle` and "
     "returns its output (None for a handle that is unknown or already "
     "synchronized)."},
};

}  // namespace

void AddTableMethods(nb::handle table_type) {
  for (PyMethodDef& def : kTableMethods) {
    nb::object method = nb::steal(PyDescr_NewMethod(
        reinterpret_cast<PyTypeObject*>(table_type.ptr()), &def));
    if (!method.is_valid() ||
        PyObject_SetAttrString(table_type.ptr(), def.ml_name, method.ptr()) !=
            0)
      throw nb::python_error();
  }
}

}  // namespace horovod
