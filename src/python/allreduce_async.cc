#include "python/allreduce_async.h"

#include <climits>
#include <cstring>
#include <memory>
#include <string_view>

#include "python/c_call.h"
#include "python/dlpack_exchange.h"
#include "python/dlpack_view.h"
#include "python/handle_table.h"
#include "python/py_engine.h"

namespace nb = nanobind;

namespace horovod {
namespace {

// A Python number as a double, for the scale factors; false for others.
bool AsScale(nb::handle h, double* out) {
  if (PyFloat_CheckExact(h.ptr())) {
    *out = PyFloat_AS_DOUBLE(h.ptr());
    return true;
  }
  if (!PyLong_CheckExact(h.ptr())) return false;
  *out = PyLong_AsDouble(h.ptr());
  if (*out == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// A Python int that fits a ReduceOp's int, or None (`fallback_op`).
bool AsOp(nb::handle h, int fallback_op, int* out) {
  if (h.is_none()) {
    *out = fallback_op;
    return true;
  }
  if (!PyLong_CheckExact(h.ptr())) return false;
  int overflow = 0;
  const long v = PyLong_AsLongAndOverflow(h.ptr(), &overflow);
  if (overflow != 0 || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

// The UTF-8 text of the str `s`; false (no error set) when it has none.
// An ASCII name (nearly every one) is read where it lies, which
// PyUnicode_AsUTF8AndSize would do after several checks and calls.
bool Utf8Of(PyObject* s, std::string_view* out) {
  if (PyUnicode_IS_COMPACT_ASCII(s)) {
    *out = std::string_view(static_cast<const char*>(PyUnicode_DATA(s)),
                            static_cast<size_t>(PyUnicode_GET_LENGTH(s)));
    return true;
  }
  Py_ssize_t len = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(s, &len);
  if (utf8 == nullptr) {
    PyErr_Clear();
    return false;
  }
  *out = std::string_view(utf8, static_cast<size_t>(len));
  return true;
}

// A framework's in-place allreduce_async_ as one C function: the calls a
// training loop makes per gradient (a named, contiguous tensor on the
// global process set, `op` an int or None, numeric scale factors, no
// `average`) are exported with `export_fn`, enqueued and filed without a
// Python frame; every other call goes to `fallback`, the adapter's Python
// implementation, with the same arguments. `default_op` is the op when
// `op` is None.
//
// A plain CPython vectorcall function rather than a nanobind one: it is
// called once per gradient, mostly with keywords, and matching those to
// parameters by their interned names' addresses costs a fraction of a
// general binding's argument processing.
struct AllreduceAsync {
  static constexpr int kParams = 7;
  nb::object table, export_fn, fallback, global_set, one;
  int default_op = 0;
  nb::object names[kParams];  // interned, in parameter order
  // Each parameter's default (borrowed from the objects above; null for
  // the required tensor).
  PyObject* defaults[kParams] = {};
  // Describes tensors for a fraction of export_fn's cost, where their type
  // offers it.
  dlpack::DlpackExchange exchange;
  // Where a call's tensor is described: kept here, not on the call's
  // stack, because a description is written whole and a fresh one would
  // be zeroed first (a string instruction, slow to start) on every call.
  // Nothing between a description and the enqueue that reads it runs
  // Python code or releases the GIL, so no other call reuses it meanwhile.
  nb::dlpack::dltensor described;
};

constexpr const char* kAllreduceAsyncParams[AllreduceAsync::kParams] = {
    "tensor",          "average",          "name",       "op",
    "prescale_factor", "postscale_factor", "process_set"};

// The call, its arguments bound to parameters and defaults filled in; a
// new reference, or null with an error set.
PyObject* AllreduceAsyncBound(AllreduceAsync& f, PyObject* const* a) {
  const nb::handle tensor = a[0], average = a[1], name = a[2], op = a[3],
                   prescale_factor = a[4], postscale_factor = a[5],
                   process_set = a[6];
  auto fall_back = [&] {
    return f
        .fallback(tensor, average, name, op, prescale_factor, postscale_factor,
                  process_set)
        .release()
        .ptr();
  };
  int reduce_op;
  double prescale, postscale;
  if (!average.is_none() || !process_set.is(f.global_set) ||
      !PyUnicode_CheckExact(name.ptr()) ||
      !AsOp(op, f.default_op, &reduce_op) ||
      !AsScale(prescale_factor, &prescale) ||
      !AsScale(postscale_factor, &postscale))
    return fall_back();
  std::string_view name_utf8;
  if (!Utf8Of(name.ptr(), &name_utf8) || name_utf8.empty()) return fall_back();
  // Described in place where the tensor's type allows, else exported (the
  // capsule lives until the tensor is enqueued; the handle keeps the
  // tensor). What neither reads goes to the fallback, which names what is
  // wrong and refuses it to the operation's peers too.
  nb::object capsule;
  const nb::dlpack::dltensor* t = nullptr;
  if (f.exchange.Describe(tensor, &f.described)) {
    t = &f.described;
  } else {
    try {
      capsule = f.export_fn(tensor);
    } catch (const nb::python_error&) {
      return fall_back();
    }
    t = dlpack::CapsuleTensor(capsule);
  }
  // A strided tensor goes to the fallback, which copies; a malformed one
  // to EnqueueTensor, which names what is wrong.
  if (t == nullptr || (dlpack::WellFormed(*t) && !dlpack::IsCompact(*t)))
    return fall_back();
  return PyLong_FromLongLong(
      EnqueueTensor(*nb::inst_ptr<HandleTable>(f.table), OpType::kAllreduce, *t,
                    tensor, nb::handle(), "allreduce", name_utf8, reduce_op,
                    prescale, postscale, 0, 0));
}

// Binds a vectorcall's arguments as Python would for the signature
// allreduce_async_(tensor, average=None, name=None, op=None,
// prescale_factor=1.0, postscale_factor=1.0, process_set=<global set>);
// false with a TypeError set when they do not fit it. `a` gets the
// defaults as one fixed-size copy (a few vector moves), then the
// positional arguments over them: choosing slot by slot took several
// times as many instructions, and clearing the array first compiles to a
// string instruction that costs more than the binding.
bool BindAllreduceAsync(const AllreduceAsync& f, PyObject* const* args,
                        Py_ssize_t nargs, PyObject* kwnames, PyObject** a) {
  constexpr int n = AllreduceAsync::kParams;
  if (nargs > n) {
    PyErr_Format(PyExc_TypeError,
                 "allreduce_async_() takes at most %d positional arguments "
                 "(%zd given)",
                 n, nargs);
    return false;
  }
  static_assert(sizeof(f.defaults) == n * sizeof(PyObject*));
  std::memcpy(a, f.defaults, sizeof(f.defaults));
  for (Py_ssize_t k = 0; k < nargs; ++k) a[k] = args[k];
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  unsigned by_keyword = 0;  // bit k: parameter k was given by keyword
  for (Py_ssize_t j = 0; j < nkw; ++j) {
    PyObject* key = PyTuple_GET_ITEM(kwnames, j);
    int k = 0;
    while (k < n && key != f.names[k].ptr()) ++k;
    // Keywords spelled at a call site are interned; others compare.
    if (k == n)
      for (k = 0; k < n; ++k)
        if (PyUnicode_Compare(key, f.names[k].ptr()) == 0) break;
    if (k == n) {
      PyErr_Format(PyExc_TypeError,
                   "allreduce_async_() got an unexpected keyword argument "
                   "'%U'",
                   key);
      return false;
    }
    if (k < nargs || (by_keyword & (1u << k)) != 0) {
      PyErr_Format(PyExc_TypeError,
                   "allreduce_async_() got multiple values for argument '%s'",
                   kAllreduceAsyncParams[k]);
      return false;
    }
    by_keyword |= 1u << k;
    a[k] = args[nargs + j];
  }
  if (a[0] == nullptr) {
    PyErr_SetString(PyExc_TypeError,
                    "allreduce_async_() missing required argument 'tensor'");
    return false;
  }
  return true;
}

PyObject* AllreduceAsyncCall(PyObject* self, PyObject* const* args,
                             Py_ssize_t nargs, PyObject* kwnames) {
  auto& f = *static_cast<AllreduceAsync*>(PyCapsule_GetPointer(self, nullptr));
  PyObject* a[AllreduceAsync::kParams];
  if (!BindAllreduceAsync(f, args, nargs, kwnames, a)) return nullptr;
  return CallTranslatingExceptions([&] { return AllreduceAsyncBound(f, a); });
}

PyMethodDef kAllreduceAsyncDef = {
    "allreduce_async_",
    // CPython's calling convention for METH_FASTCALL | METH_KEYWORDS,
    // stored as a PyCFunction (through void(*)(), the usual cast).
    reinterpret_cast<PyCFunction>(
        reinterpret_cast<void (*)()>(AllreduceAsyncCall)),
    METH_FASTCALL | METH_KEYWORDS,
    "allreduce_async_(tensor, average=None, name=None, op=None, "
    "prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set)"
    "\n\nStarts an in-place allreduce of `tensor`; returns its handle."};

}  // namespace

nb::object MakeAllreduceAsync(nb::object table_obj, nb::object export_fn,
                              nb::object fallback, nb::object global_set,
                              int default_op) {
  // Each call reaches the table by address: it must be one, initialized.
  if (!nb::isinstance<HandleTable>(table_obj) || !nb::inst_ready(table_obj))
    throw nb::type_error(
        "allreduce_async_function: `table` must be an initialized "
        "HandleTable");
  auto state = std::make_unique<AllreduceAsync>();
  state->table = std::move(table_obj);
  state->export_fn = std::move(export_fn);
  state->fallback = std::move(fallback);
  state->global_set = std::move(global_set);
  state->one = nb::float_(1.0);
  state->default_op = default_op;
  // In kAllreduceAsyncParams' order; the tensor has none.
  PyObject* const none = Py_None;
  PyObject* const one = state->one.ptr();
  PyObject* const defaults[AllreduceAsync::kParams] = {
      nullptr, none, none, none, one, one, state->global_set.ptr()};
  for (int k = 0; k < AllreduceAsync::kParams; ++k) {
    state->defaults[k] = defaults[k];
    state->names[k] =
        nb::steal(PyUnicode_InternFromString(kAllreduceAsyncParams[k]));
  }
  nb::object holder =
      nb::steal(PyCapsule_New(state.get(), nullptr, [](PyObject* c) {
        delete static_cast<AllreduceAsync*>(PyCapsule_GetPointer(c, nullptr));
      }));
  if (!holder.is_valid()) throw nb::python_error();
  state.release();
  nb::object fn =
      nb::steal(PyCFunction_NewEx(&kAllreduceAsyncDef, holder.ptr(), nullptr));
  if (!fn.is_valid()) throw nb::python_error();
  return fn;
}

}  // namespace horovod
