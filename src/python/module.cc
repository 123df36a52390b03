// horovod._core: the one seam between Python and the engine. Tensors come in
// through DLPack (capsules read in place, other exporters through nanobind's
// ndarray import) and engine-allocated outputs go back out as DLPack, so no
// framework header is ever compiled in. No logic lives here beyond
// conversion (dlpack_view.h), and the choice between an adapter's C and
// Python paths of allreduce_async_; waits release the GIL.
#include <horovod/engine.h>
#include <horovod/framework_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <climits>
#include <memory>

#include "common/knobs.h"
#include "jax/xla_collective.h"
#include "kernels/engine_binding.h"
#include "python/dlpack_view.h"
#include "python/handle_table.h"

namespace nb = nanobind;
using namespace horovod;

namespace {

[[noreturn]] void Raise(const Status& st) {
  if (st.code() == StatusCode::kInvalidArgument)
    throw nb::value_error(st.message().c_str());
  throw std::runtime_error(st.message());
}

// Sets the arguments Python passes as numbers; the name and splits are
// the caller's to set.
void SetArgs(CollectiveArgs* args, int reduce_op, double prescale,
             double postscale, int root, int process_set) {
  args->op = static_cast<ReduceOp>(reduce_op);
  args->prescale = prescale;
  args->postscale = postscale;
  args->root = root;
  args->process_set = process_set;
}

// Kernels linked into this module (the XLA handler) reach the engine
// through the process's binding, from start until shutdown.
struct PyEngine {
  std::unique_ptr<Engine> engine;
  // The view and arguments EnqueueOne rewrites each call: a steady step's
  // calls allocate nothing, and they are not thread-local storage, which
  // costs a lookup each use in a shared library (the GIL orders the calls).
  TensorView view;
  CollectiveArgs args;
  Engine& get() {
    if (!engine) throw nb::value_error("Horovod has been shut down");
    return *engine;
  }
  void Bind() {
    kernels::EngineBinding::Process().Bind(FrameworkApi(), engine.get());
  }
  void Stop() {
    if (!engine) return;
    kernels::EngineBinding::Process().Bind(nullptr, nullptr);
    engine.reset();
  }
  ~PyEngine() { Stop(); }
};

// enqueue_one's body (see its binding): one array to the table's engine,
// filed under a new handle number. `array` is a DLPack capsule, read in
// place, or any other DLPack exporter, imported by nanobind.
int64_t EnqueueOne(HandleTable& table, OpType op, nb::handle array,
                   nb::object keep, nb::object finish, std::string_view prefix,
                   std::string_view name, int reduce_op, double prescale,
                   double postscale, int root, int process_set) {
  nb::ndarray<> imported;  // alive while the tensor is read
  nb::dlpack::dltensor from_import;
  const nb::dlpack::dltensor* tensor = dlpack::CapsuleTensor(array);
  if (tensor == nullptr) {
    if (!nb::try_cast(array, imported))
      throw nb::type_error(
          "expected a DLPack capsule or an object with __dlpack__");
    from_import = dlpack::TensorOf(imported);
    tensor = &from_import;
  }
  if (table.engine().is_none())
    throw nb::value_error("Horovod has not been initialized; use hvd.init().");
  PyEngine& pe = *nb::inst_ptr<PyEngine>(table.engine());
  TensorView& view = pe.view;
  CollectiveArgs& args = pe.args;
  Engine* eng = nullptr;
  try {
    eng = &pe.get();
    dlpack::ToView(*tensor, eng->rank(), &view);
  } catch (const nb::builtin_exception& x) {
    table.RaiseInvalidArgument(x.what());
  }
  args.name.assign(prefix);
  if (!name.empty()) args.name.append(".").append(name);
  SetArgs(&args, reduce_op, prescale, postscale, root, process_set);
  Handle handle;
  Status st = eng->Enqueue(op, view, args, &handle);
  if (!st.ok()) table.Raise(st);
  return table.AddOne(std::move(handle), std::move(finish), std::move(keep));
}

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
};

constexpr const char* kAllreduceAsyncParams[AllreduceAsync::kParams] = {
    "tensor",          "average",          "name",       "op",
    "prescale_factor", "postscale_factor", "process_set"};

// The call, its arguments bound to parameters and defaults filled in.
nb::object AllreduceAsyncBound(const AllreduceAsync& f, const nb::handle* a) {
  const nb::handle tensor = a[0], average = a[1], name = a[2], op = a[3],
                   prescale_factor = a[4], postscale_factor = a[5],
                   process_set = a[6];
  auto fall_back = [&] {
    return f.fallback(tensor, average, name, op, prescale_factor,
                      postscale_factor, process_set);
  };
  int reduce_op;
  double prescale, postscale;
  if (!average.is_none() || !process_set.is(f.global_set) ||
      !PyUnicode_CheckExact(name.ptr()) ||
      !AsOp(op, f.default_op, &reduce_op) ||
      !AsScale(prescale_factor, &prescale) ||
      !AsScale(postscale_factor, &postscale))
    return fall_back();
  Py_ssize_t name_len = 0;
  const char* name_utf8 = PyUnicode_AsUTF8AndSize(name.ptr(), &name_len);
  if (name_utf8 == nullptr) PyErr_Clear();
  if (name_utf8 == nullptr || name_len == 0) return fall_back();
  nb::object capsule = f.export_fn(tensor);
  const nb::dlpack::dltensor* t = dlpack::CapsuleTensor(capsule);
  // A strided tensor goes to the fallback, which copies; a malformed one
  // to EnqueueOne, which names what is wrong.
  if (t == nullptr || (dlpack::WellFormed(*t) && !dlpack::IsCompact(*t)))
    return fall_back();
  return nb::int_(
      EnqueueOne(*nb::inst_ptr<HandleTable>(f.table), OpType::kAllreduce,
                 capsule, nb::borrow(tensor), nb::none(), "allreduce",
                 std::string_view(name_utf8, static_cast<size_t>(name_len)),
                 reduce_op, prescale, postscale, 0, 0));
}

// Binds a vectorcall's arguments as Python would for the signature
// allreduce_async_(tensor, average=None, name=None, op=None,
// prescale_factor=1.0, postscale_factor=1.0, process_set=<global set>);
// false with a TypeError set when they do not fit it.
bool BindAllreduceAsync(const AllreduceAsync& f, PyObject* const* args,
                        Py_ssize_t nargs, PyObject* kwnames, nb::handle* a) {
  constexpr int n = AllreduceAsync::kParams;
  if (nargs > n) {
    PyErr_Format(PyExc_TypeError,
                 "allreduce_async_() takes at most %d positional arguments "
                 "(%zd given)",
                 n, nargs);
    return false;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) a[i] = args[i];
  const Py_ssize_t nkw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
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
    if (a[k].ptr() != nullptr) {
      PyErr_Format(PyExc_TypeError,
                   "allreduce_async_() got multiple values for argument '%s'",
                   kAllreduceAsyncParams[k]);
      return false;
    }
    a[k] = args[nargs + j];
  }
  if (a[0].ptr() == nullptr) {
    PyErr_SetString(PyExc_TypeError,
                    "allreduce_async_() missing required argument 'tensor'");
    return false;
  }
  for (int k = 1; k < n; ++k)
    if (a[k].ptr() == nullptr)
      a[k] = k == n - 1 ? f.global_set : k >= 4 ? f.one : nb::none();
  return true;
}

PyObject* AllreduceAsyncCall(PyObject* self, PyObject* const* args,
                             Py_ssize_t nargs, PyObject* kwnames) {
  const auto& f =
      *static_cast<const AllreduceAsync*>(PyCapsule_GetPointer(self, nullptr));
  nb::handle a[AllreduceAsync::kParams];
  if (!BindAllreduceAsync(f, args, nargs, kwnames, a)) return nullptr;
  try {
    return AllreduceAsyncBound(f, a).release().ptr();
  } catch (nb::python_error& e) {
    e.restore();
  } catch (const nb::builtin_exception& e) {
    PyObject* type = PyExc_RuntimeError;
    if (e.type() == nb::exception_type::value_error) type = PyExc_ValueError;
    if (e.type() == nb::exception_type::type_error) type = PyExc_TypeError;
    PyErr_SetString(type, e.what());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
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

nb::object MakeAllreduceAsync(nb::object table_obj, nb::object export_fn,
                              nb::object fallback, nb::object global_set,
                              int default_op) {
  auto state = std::make_unique<AllreduceAsync>();
  state->table = std::move(table_obj);
  state->export_fn = std::move(export_fn);
  state->fallback = std::move(fallback);
  state->global_set = std::move(global_set);
  state->one = nb::float_(1.0);
  state->default_op = default_op;
  for (int k = 0; k < AllreduceAsync::kParams; ++k)
    state->names[k] =
        nb::steal(PyUnicode_InternFromString(kAllreduceAsyncParams[k]));
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

}  // namespace

NB_MODULE(_core, m) {
  // Handles still pending when the interpreter exits (a script that never
  // synchronized) are not leaks worth a report.
  nb::set_leak_warnings(false);
  // Adapters take these values from here instead of mirroring them.
  nb::enum_<DataType>(m, "DataType")
      .value("uint8", DataType::kUInt8)
      .value("int8", DataType::kInt8)
      .value("int16", DataType::kInt16)
      .value("int32", DataType::kInt32)
      .value("int64", DataType::kInt64)
      .value("float16", DataType::kFloat16)
      .value("bfloat16", DataType::kBFloat16)
      .value("float32", DataType::kFloat32)
      .value("float64", DataType::kFloat64)
      .value("bool", DataType::kBool);
  nb::enum_<ReduceOp>(m, "ReduceOp")
      .value("Average", ReduceOp::kAverage)
      .value("Sum", ReduceOp::kSum)
      .value("Adasum", ReduceOp::kAdasum)
      .value("Min", ReduceOp::kMin)
      .value("Max", ReduceOp::kMax)
      .value("Product", ReduceOp::kProduct);
  nb::enum_<OpType>(m, "OpType")
      .value("allreduce", OpType::kAllreduce)
      .value("allgather", OpType::kAllgather)
      .value("broadcast", OpType::kBroadcast)
      .value("alltoall", OpType::kAlltoall)
      .value("reducescatter", OpType::kReducescatter)
      .value("barrier", OpType::kBarrier)
      .value("join", OpType::kJoin);
  nb::enum_<StatusCode>(m, "StatusCode")
      .value("ok", StatusCode::kOk)
      .value("invalid_argument", StatusCode::kInvalidArgument)
      .value("mismatch", StatusCode::kMismatch)
      .value("aborted", StatusCode::kAborted)
      .value("timeout", StatusCode::kTimeout)
      .value("internal", StatusCode::kInternal)
      .value("tampered", StatusCode::kTampered);

  // Finished engine handles, as the adapters' `finish` functions read them
  // (waiting is the HandleTable's).
  nb::class_<Handle>(m, "Handle")
      // as_bits: the output as unsigned integers of the element's width,
      // for consumers (NumPy) that cannot import bfloat16 through DLPack.
      .def(
          "output_array",
          [](const Handle& h, bool as_bits) {
            std::shared_ptr<Buffer> buf = h.output();
            if (!buf) throw nb::value_error("operation has no output");
            auto* keep = new std::shared_ptr<Buffer>(buf);
            nb::capsule owner(keep, [](void* p) noexcept {
              delete static_cast<std::shared_ptr<Buffer>*>(p);
            });
            std::vector<size_t> shape(h.output_shape().begin(),
                                      h.output_shape().end());
            nb::dlpack::dtype dt = dlpack::ToDlpack(h.dtype());
            if (as_bits)
              dt.code = static_cast<uint8_t>(nb::dlpack::dtype_code::UInt);
            return nb::ndarray<>(buf->data(), shape.size(), shape.data(), owner,
                                 nullptr, dt);
          },
          nb::arg("as_bits") = false)
      .def_prop_ro("dtype", [](const Handle& h) { return h.dtype(); })
      .def_prop_ro("output_shape", &Handle::output_shape)
      .def_prop_ro("received_splits", &Handle::received_splits)
      .def_prop_ro("int_result", &Handle::int_result);

  nb::class_<PyEngine>(m, "Engine")
      .def_static("start",
                  [](int generation) {
                    JobInfo job;
                    Status st = JobInfo::FromEnvironment(&job, generation);
                    if (!st.ok()) Raise(st);
                    auto* e = new PyEngine();
                    {
                      nb::gil_scoped_release release;
                      st = Engine::Start(job, &e->engine);
                    }
                    if (!st.ok()) {
                      delete e;
                      Raise(st);
                    }
                    e->Bind();
                    return e;
                  })
      .def("leave_census", [](PyEngine& e) { e.get().LeaveCensus(); })
      // For kernel libraries the frameworks load (framework_api.h): the C
      // table's address and this engine's, valid until shutdown.
      .def("framework_api",
           [](PyEngine& e) {
             return std::make_tuple(reinterpret_cast<uintptr_t>(FrameworkApi()),
                                    reinterpret_cast<uintptr_t>(&e.get()));
           })
      .def("rank", [](PyEngine& e) { return e.get().rank(); })
      .def("size", [](PyEngine& e) { return e.get().size(); })
      .def("local_rank", [](PyEngine& e) { return e.get().local_rank(); })
      .def("local_size", [](PyEngine& e) { return e.get().local_size(); })
      .def("cross_rank", [](PyEngine& e) { return e.get().cross_rank(); })
      .def("cross_size", [](PyEngine& e) { return e.get().cross_size(); })
      .def("is_homogeneous",
           [](PyEngine& e) { return e.get().is_homogeneous(); })
      .def("enqueue",
           [](PyEngine& e, int op, const std::vector<nb::ndarray<>>& arrays,
              const std::string& name, int reduce_op, double prescale,
              double postscale, int root, std::vector<int64_t> splits,
              int process_set, const std::vector<int>& bfloat16_bits) {
             Engine& eng = e.get();
             std::vector<TensorView> views;
             views.reserve(arrays.size());
             for (const auto& a : arrays)
               views.push_back(dlpack::ToView(a, eng.rank()));
             // Arrays NumPy holds as bfloat16 arrive as their uint16 bits.
             for (int i : bfloat16_bits) {
               if (i < 0 || i >= static_cast<int>(views.size()) ||
                   views[i].dtype != DataType::kInt16)
                 throw nb::value_error("bfloat16_bits must name 16-bit arrays");
               views[i].dtype = DataType::kBFloat16;
             }
             CollectiveArgs args;
             args.name = name;
             SetArgs(&args, reduce_op, prescale, postscale, root, process_set);
             args.splits = std::move(splits);
             std::vector<Handle> handles;
             Status st =
                 eng.Enqueue(static_cast<OpType>(op), views, args, &handles);
             if (!st.ok()) Raise(st);
             return handles;
           })
      .def("barrier",
           [](PyEngine& e, int process_set) {
             Status st;
             Engine& eng = e.get();
             {
               nb::gil_scoped_release release;
               st = eng.Barrier(process_set);
             }
             if (!st.ok()) Raise(st);
           })
      .def("join",
           [](PyEngine& e) {
             int last = -1;
             Status st;
             Engine& eng = e.get();
             {
               nb::gil_scoped_release release;
               st = eng.Join(&last);
             }
             if (!st.ok()) Raise(st);
             return last;
           })
      .def("add_process_set",
           [](PyEngine& e, std::vector<int> ranks) {
             int id = -1;
             Status st;
             Engine& eng = e.get();
             {
               nb::gil_scoped_release release;
               st = eng.AddProcessSet(ranks, &id);
             }
             if (!st.ok()) Raise(st);
             return id;
           })
      .def("remove_process_set",
           [](PyEngine& e, int id) {
             Status st;
             Engine& eng = e.get();
             {
               nb::gil_scoped_release release;
               st = eng.RemoveProcessSet(id);
             }
             if (!st.ok()) Raise(st);
           })
      .def("process_set_ranks",
           [](PyEngine& e, int id) {
             std::vector<int> ranks;
             Status st = e.get().ProcessSetRanks(id, &ranks);
             if (!st.ok()) Raise(st);
             return ranks;
           })
      .def("start_timeline",
           [](PyEngine& e, const std::string& path, bool mark_cycles) {
             Status st = e.get().StartTimeline(path, mark_cycles);
             if (!st.ok()) Raise(st);
           })
      .def("stop_timeline",
           [](PyEngine& e) {
             nb::gil_scoped_release release;
             e.get().StopTimeline();
           })
      .def("metrics",
           [](PyEngine& e) {
             const EngineMetrics m = e.get().Metrics();
             nb::dict d;
             d["cycles"] = m.cycles;
             d["responses"] = m.responses;
             d["tensors"] = m.tensors;
             d["bytes"] = m.bytes;
             d["cache_hits"] = m.cache_hits;
             d["cache_misses"] = m.cache_misses;
             d["board_overdue"] = m.board_overdue;
             d["idle_s"] = m.idle_s;
             d["negotiate_s"] = m.negotiate_s;
             d["bookkeeping_s"] = m.bookkeeping_s;
             d["copy_s"] = m.copy_s;
             d["transfer_s"] = m.transfer_s;
             d["wait_s"] = m.wait_s;
             return d;
           })
      .def("process_set_ids",
           [](PyEngine& e) { return e.get().ProcessSetIds(); })
      .def("shutdown", [](PyEngine& e) {
        nb::gil_scoped_release release;
        e.Stop();
      });

  nb::class_<HandleTable>(m, "HandleTable")
      .def(nb::init<nb::object, nb::object>())
      .def("add", &HandleTable::Add, nb::arg("core_handles"),
           nb::arg("finish").none(), nb::arg("arrays").none())
      // Adapters export these bound methods as their poll and synchronize,
      // without a Python frame around them.
      .def("poll", &HandleTable::Poll, nb::arg("handle"),
           "True if the operation behind `handle` has finished.")
      .def("synchronize", &HandleTable::Synchronize, nb::arg("handle"),
           "Waits for the operation behind `handle` and returns its output.")
      // An engine listener (HorovodBasics.add_engine_listener): the engine
      // after each init, None before each shutdown.
      .def(
          "bind",
          [](HandleTable& table, nb::object engine) {
            if (!engine.is_none() && !nb::isinstance<PyEngine>(engine))
              throw nb::type_error("HandleTable.bind: an Engine or None");
            table.Bind(std::move(engine));
          },
          nb::arg("engine").none())
      // One array, no splits or bfloat16 bits: the common collective, from
      // enqueue to its handle number in one call, with no list to marshal
      // and no Python handle object, on the bound engine. The name is
      // `prefix`.`name` (just `prefix` when `name` is empty), joined here
      // rather than as a Python string. `keep` stays referenced until
      // synchronize and is its result when `finish` is None. Raises the
      // table's own error types, so callers need no Python frame to map
      // them.
      .def(
          "enqueue_one",
          [](HandleTable& table, int op, nb::handle array, nb::object keep,
             nb::object finish, std::string_view prefix, std::string_view name,
             int reduce_op, double prescale, double postscale, int root,
             int process_set) {
            return EnqueueOne(table, static_cast<OpType>(op), array,
                              std::move(keep), std::move(finish), prefix, name,
                              reduce_op, prescale, postscale, root,
                              process_set);
          },
          nb::arg("op"), nb::arg("array"), nb::arg("keep").none(),
          nb::arg("finish").none(), nb::arg("prefix"), nb::arg("name"),
          nb::arg("reduce_op"), nb::arg("prescale"), nb::arg("postscale"),
          nb::arg("root"), nb::arg("process_set"));
  m.def("allreduce_async_function", &MakeAllreduceAsync, nb::arg("table"),
        nb::arg("export"), nb::arg("fallback"), nb::arg("global_set"),
        nb::arg("default_op"));
  // The XLA FFI handler's address, for jax.ffi.register_ffi_target.
  m.def("xla_collective_handler",
        [] { return reinterpret_cast<uintptr_t>(&HorovodXlaCollective); });
  // The knob table as (name, type, default, range, flags, summary, job)
  // tuples, for the checks that hold the docs and horovodrun to it.
  m.def("knob_table", [] {
    static const char* kTypes[] = {"int", "double", "bool", "string"};
    std::vector<std::tuple<std::string, std::string, std::string, std::string,
                           std::string, std::string, bool>>
        out;
    for (const KnobSpec& k : KnobTable())
      out.emplace_back(k.name, kTypes[static_cast<int>(k.type)], KnobDefault(k),
                       KnobRange(k), k.flags, k.summary, k.job);
    return out;
  });
}
