// horovod._core: the one seam between Python and the engine. Tensors come in
// through DLPack (capsules read in place, tensors described through their
// type's exchange table, other exporters through nanobind's ndarray import)
// and engine-allocated outputs go back out as DLPack, so no framework
// header is ever compiled in. Only the bindings live here: conversion is
// dlpack_view.h's and dlpack_exchange.h's, the one-tensor enqueue
// py_engine.h's, the C path of allreduce_async_ allreduce_async.h's; waits
// release the GIL.
#include <horovod/engine.h>
#include <horovod/framework_api.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "common/knobs.h"
#include "jax/xla_collective.h"
#include "python/allreduce_async.h"
#include "python/dlpack_view.h"
#include "python/handle_table.h"
#include "python/py_engine.h"
#include "python/table_methods.h"

namespace nb = nanobind;
using namespace horovod;

namespace {

[[noreturn]] void Raise(const Status& st) {
  if (st.code() == StatusCode::kInvalidArgument)
    throw nb::value_error(st.message().c_str());
  throw std::runtime_error(st.message());
}

// The views of an enqueue's arrays and of their out-of-place sources (one
// per array, or none); throws naming what cannot be read.
void ReadInput(const Engine& eng, const std::vector<nb::ndarray<>>& arrays,
               const std::vector<int>& bfloat16_bits,
               const std::vector<nb::ndarray<>>& sources,
               std::vector<TensorView>* views, std::vector<TensorView>* froms) {
  // The caller keeps the sources alive until the handles finish.
  if (!sources.empty() && sources.size() != arrays.size())
    throw nb::value_error("sources must be empty or one per array");
  views->reserve(arrays.size());
  for (const auto& a : arrays) views->push_back(dlpack::ToView(a, eng.rank()));
  for (const auto& a : sources) froms->push_back(dlpack::ToView(a, eng.rank()));
  // Arrays NumPy holds as bfloat16 arrive as their uint16 bits, and so do
  // their sources.
  for (int i : bfloat16_bits) {
    if (i < 0 || i >= static_cast<int>(views->size()) ||
        (*views)[i].dtype != DataType::kInt16)
      throw nb::value_error("bfloat16_bits must name 16-bit arrays");
    (*views)[i].dtype = DataType::kBFloat16;
    if (!froms->empty() && (*froms)[i].dtype == DataType::kInt16)
      (*froms)[i].dtype = DataType::kBFloat16;
  }
  for (size_t i = 0; i < froms->size(); ++i) {
    dlpack::CheckSource((*froms)[i], (*views)[i], eng.rank());
    (*views)[i].input = (*froms)[i].data;
  }
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
                    e->rank = e->engine->rank();
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
      .def(
          "enqueue",
          [](PyEngine& e, int op, const std::vector<nb::ndarray<>>& arrays,
             const std::string& name, nb::handle reduce_op, nb::handle prescale,
             nb::handle postscale, nb::handle root, std::vector<int64_t> splits,
             int process_set, const std::vector<int>& bfloat16_bits,
             const std::vector<nb::ndarray<>>& sources) {
            Engine& eng = e.get();
            CollectiveArgs args;
            args.name = name;
            args.process_set = process_set;
            std::vector<TensorView> views, froms;
            PyNumbers n;
            try {
              ReadInput(eng, arrays, bfloat16_bits, sources, &views, &froms);
              n = PyNumbers::From(reduce_op, prescale, postscale, root,
                                  eng.rank());
            } catch (const std::exception& x) {
              RefuseInput(&eng, static_cast<OpType>(op), arrays.size(), args,
                          x.what());
              throw;
            }
            SetArgs(&args, n.reduce_op, n.prescale, n.postscale, n.root,
                    process_set);
            args.splits = std::move(splits);
            std::vector<Handle> handles;
            Status st =
                eng.Enqueue(static_cast<OpType>(op), views, args, &handles);
            if (!st.ok()) Raise(st);
            return handles;
          },
          // The numbers as Python passes them, None included: PyNumbers
          // names what is wrong with them.
          nb::arg("op"), nb::arg("arrays"), nb::arg("name"),
          nb::arg("reduce_op").none(), nb::arg("prescale").none(),
          nb::arg("postscale").none(), nb::arg("root").none(),
          nb::arg("splits"), nb::arg("process_set"), nb::arg("bfloat16_bits"),
          nb::arg("sources"))
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
           [](PyEngine& e, const std::vector<int64_t>& ranks) {
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

  nb::class_<HandleTable> table_class(m, "HandleTable");
  table_class.def(nb::init<nb::object, nb::object>())
      .def("add", &HandleTable::Add, nb::arg("core_handles"),
           nb::arg("finish").none(), nb::arg("arrays").none())
      // An engine listener (HorovodBasics.add_engine_listener): the engine
      // after each init, None before each shutdown.
      .def(
          "bind",
          [](HandleTable& table, nb::object engine) {
            if (!engine.is_none() &&
                (!nb::isinstance<PyEngine>(engine) || !nb::inst_ready(engine)))
              throw nb::type_error(
                  "HandleTable.bind: a started Engine or None");
            PyEngine* bound =
                engine.is_none() ? nullptr : nb::inst_ptr<PyEngine>(engine);
            table.Bind(std::move(engine), bound);
          },
          nb::arg("engine").none())
      // One array, no splits or bfloat16 bits: the common collective, from
      // enqueue to its handle number in one call, with no list to marshal
      // and no Python handle object, on the bound engine. The name is
      // `prefix`.`name` (just `prefix` when `name` is empty), joined here
      // rather than as a Python string. `keep` stays referenced until
      // synchronize and is its result when `finish` is None. A `source`
      // (None: in place) is an allreduce's input, read while the result
      // goes to `array`. Raises the table's own error types, so callers
      // need no Python frame to map them.
      .def(
          "enqueue_one",
          [](HandleTable& table, int op, nb::handle array, nb::object keep,
             nb::object finish, std::string_view prefix, std::string_view name,
             nb::handle reduce_op, nb::handle prescale, nb::handle postscale,
             nb::handle root, int process_set, nb::handle source) {
            return EnqueueOne(table, static_cast<OpType>(op), array,
                              std::move(keep), std::move(finish), prefix, name,
                              reduce_op, prescale, postscale, root, process_set,
                              source);
          },
          nb::arg("op"), nb::arg("array"), nb::arg("keep").none(),
          nb::arg("finish").none(), nb::arg("prefix"), nb::arg("name"),
          nb::arg("reduce_op").none(), nb::arg("prescale").none(),
          nb::arg("postscale").none(), nb::arg("root").none(),
          nb::arg("process_set"), nb::arg("source").none() = nb::none());
  // A collective's numbers as enqueue_one takes them, for adapters that
  // pass them on another way (TensorFlow's op attributes, XLA's): the
  // tuple (reduce_op, prescale, postscale, root) of int, float, float, int.
  table_class.def(
      "numbers",
      [](HandleTable& table, nb::handle reduce_op, nb::handle prescale,
         nb::handle postscale, nb::handle root) {
        const PyNumbers n =
            TableNumbers(table, reduce_op, prescale, postscale, root);
        return std::make_tuple(n.reduce_op, n.prescale, n.postscale, n.root);
      },
      nb::arg("reduce_op").none() = static_cast<int>(ReduceOp::kSum),
      nb::arg("prescale").none() = 1.0, nb::arg("postscale").none() = 1.0,
      nb::arg("root").none() = 0);
  // For input refused before it reached the engine (Engine::Refuse): the
  // operation's peers fail with `message` rather than wait for this rank.
  // Returns once they have, or at once with no engine.
  table_class.def(
      "refuse",
      [](HandleTable& table, int op, const std::string& name, int process_set,
         size_t n, const std::string& message) {
        PyEngine* pe = table.engine();
        CollectiveArgs args;
        args.name = name;
        args.process_set = process_set;
        RefuseInput(pe != nullptr ? pe->engine.get() : nullptr,
                    static_cast<OpType>(op), n, args, message.c_str());
      },
      nb::arg("op"), nb::arg("name"), nb::arg("process_set"), nb::arg("n"),
      nb::arg("message"));
  // poll and synchronize: see table_methods.h. Adapters export the bound
  // methods as theirs, without a Python frame around them.
  AddTableMethods(table_class);
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
