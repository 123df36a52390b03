// PyEngine: the engine as horovod._core holds it (Engine.start's result),
// and the one-tensor enqueue that the module's bindings and the adapters'
// allreduce_async_ share: one DLPack tensor to the engine, filed in a
// HandleTable under a new handle number.
//
// PyEngine owns the engine and binds it for the kernels linked into the
// module while it runs. Everything here runs holding the GIL, which orders
// the calls that reuse PyEngine's view and arguments.
#ifndef HOROVOD_PYTHON_PY_ENGINE_H_
#define HOROVOD_PYTHON_PY_ENGINE_H_

#include <horovod/engine.h>
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <memory>
#include <string_view>

#include "python/handle_table.h"
#include "python/py_number.h"

namespace horovod {

// Kernels linked into this module (the XLA handler) reach the engine
// through the process's binding, from start until shutdown.
struct PyEngine {
  std::unique_ptr<Engine> engine;
  int rank = -1;  // the engine's, named in errors about a call's input
  // The view and arguments EnqueueTensor rewrites each call: a steady
  // step's calls allocate nothing, and they are not thread-local storage,
  // which costs a lookup each use in a shared library (the GIL orders the
  // calls).
  TensorView view;
  TensorView source;  // an out-of-place allreduce's input, checked here
  CollectiveArgs args;
  Engine& get() {
    if (!engine) throw nanobind::value_error("Horovod has been shut down");
    return *engine;
  }
  void Bind();
  void Stop();
  ~PyEngine() { Stop(); }
};

// Sets the arguments Python passes as numbers; the name and splits are
// the caller's to set.
void SetArgs(CollectiveArgs* args, int reduce_op, double prescale,
             double postscale, int root, int process_set);

// Enqueues `tensor` on the table's engine and files it under a new handle
// number, which it returns. The name is `prefix`.`name` (just `prefix` when
// `name` is empty). The table takes a reference to `keep`, which stays
// referenced until synchronize and is its result when `finish` is None or
// null. A non-null `source` makes an allreduce out of place: it is read,
// and the result written to `tensor`, which must match its dtype, shape
// and device; the table keeps `source_keep` (what holds its memory)
// referenced until synchronize. Raises the table's error types.
int64_t EnqueueTensor(HandleTable& table, OpType op,
                      const nanobind::dlpack::dltensor& tensor,
                      nanobind::handle keep, nanobind::handle finish,
                      std::string_view prefix, std::string_view name,
                      int reduce_op, double prescale, double postscale,
                      int root, int process_set,
                      const nanobind::dlpack::dltensor* source = nullptr,
                      nanobind::handle source_keep = nanobind::handle());

// Engine::Refuse for an operation whose input this rank could not read
// (its dtype, its numbers): the peers' calls fail with `why` rather than
// wait for it. Waits for them without the GIL; does nothing when `engine`
// is null.
void RefuseInput(Engine* engine, OpType op, size_t n,
                 const CollectiveArgs& args, const char* why);

// PyNumbers::From with the rank of the table's engine (-1 when none is
// bound), raising the table's InvalidArgument type where From raises
// ValueError.
PyNumbers TableNumbers(HandleTable& table, nanobind::handle reduce_op,
                       nanobind::handle prescale, nanobind::handle postscale,
                       nanobind::handle root);

// EnqueueTensor for `array` and, unless None, `source`: each a DLPack
// capsule, read in place, or any other DLPack exporter, imported by
// nanobind; the numbers as Python passes them (PyNumbers).
int64_t EnqueueOne(HandleTable& table, OpType op, nanobind::handle array,
                   nanobind::handle keep, nanobind::handle finish,
                   std::string_view prefix, std::string_view name,
                   nanobind::handle reduce_op, nanobind::handle prescale,
                   nanobind::handle postscale, nanobind::handle root,
                   int process_set, nanobind::handle source);

}  // namespace horovod

#endif  // HOROVOD_PYTHON_PY_ENGINE_H_
