#include "python/py_engine.h"

#include <horovod/framework_api.h>

#include <string>

#include "kernels/engine_binding.h"
#include "python/dlpack_view.h"

namespace nb = nanobind;

namespace horovod {

void PyEngine::Bind() {
  kernels::EngineBinding::Process().Bind(FrameworkApi(), engine.get());
}

void PyEngine::Stop() {
  if (!engine) return;
  kernels::EngineBinding::Process().Bind(nullptr, nullptr);
  engine.reset();
}

void SetArgs(CollectiveArgs* args, int reduce_op, double prescale,
             double postscale, int root, int process_set) {
  args->op = ReduceOpFromInt(reduce_op);
  args->prescale = prescale;
  args->postscale = postscale;
  args->root = root;
  args->process_set = process_set;
}

namespace {

// Sets `*out` to `prefix`.`name` (`prefix` alone for an empty name).
// Consecutive calls mostly share the prefix: only the rest is rewritten,
// in place, with no call into the string's out-of-line members when the
// lengths match.
void JoinName(std::string_view prefix, std::string_view name,
              std::string* out) {
  const size_t head = prefix.size() + (name.empty() ? 0 : 1);
  if (out->size() < head ||
      std::string_view(*out).substr(0, prefix.size()) != prefix ||
      (!name.empty() && (*out)[prefix.size()] != '.')) {
    out->assign(prefix);
    if (!name.empty()) out->push_back('.');
  }
  out->resize(head + name.size());
  std::char_traits<char>::copy(&(*out)[head], name.data(), name.size());
}

}  // namespace

void RefuseInput(Engine* engine, OpType op, size_t n,
                 const CollectiveArgs& args, const char* why) {
  if (engine == nullptr) return;
  nb::gil_scoped_release release;
  engine->Refuse(op, n, args, Status::InvalidArgument(why));
}

int64_t EnqueueTensor(HandleTable& table, OpType op,
                      const nb::dlpack::dltensor& tensor, nb::handle keep,
                      nb::handle finish, std::string_view prefix,
                      std::string_view name, int reduce_op, double prescale,
                      double postscale, int root, int process_set,
                      const nb::dlpack::dltensor* source,
                      nb::handle source_keep) {
  PyEngine* pe = table.engine();
  if (pe == nullptr)
    throw nb::value_error("Horovod has not been initialized; use hvd.init().");
  TensorView& view = pe->view;
  CollectiveArgs& args = pe->args;
  JoinName(prefix, name, &args.name);
  SetArgs(&args, reduce_op, prescale, postscale, root, process_set);
  Engine* eng = nullptr;
  try {
    eng = &pe->get();
    dlpack::ToView(tensor, pe->rank, &view);
    view.input = nullptr;
    if (source != nullptr) {
      dlpack::ToView(*source, pe->rank, &pe->source);
      dlpack::CheckSource(pe->source, view, pe->rank);
      view.input = pe->source.data;
    }
  } catch (const nb::builtin_exception& x) {
    RefuseInput(eng, op, 1, args, x.what());
    table.RaiseInvalidArgument(x.what());
  }
  Status st = eng->Enqueue(op, view, args, table.Reserve());
  if (!st.ok()) table.Raise(st);
  return table.FileReserved(finish, keep, source_keep);
}

namespace {

// The DLPack tensor of `array` (a capsule read in place, or an exporter
// imported into `*imported`, which the caller keeps alive while it reads);
// `*storage` holds an imported one's description.
const nb::dlpack::dltensor* TensorOfArray(nb::handle array,
                                          nb::ndarray<>* imported,
                                          nb::dlpack::dltensor* storage) {
  const nb::dlpack::dltensor* tensor = dlpack::CapsuleTensor(array);
  if (tensor != nullptr) return tensor;
  if (!nb::try_cast(array, *imported))
    throw nb::type_error(
        "expected a DLPack capsule or an object with __dlpack__");
  *storage = dlpack::TensorOf(*imported);
  return storage;
}

}  // namespace

PyNumbers TableNumbers(HandleTable& table, nb::handle reduce_op,
                       nb::handle prescale, nb::handle postscale,
                       nb::handle root) {
  try {
    const PyEngine* pe = table.engine();  // none while a graph is traced
    return PyNumbers::From(reduce_op, prescale, postscale, root,
                           pe != nullptr ? pe->rank : -1);
  } catch (const nb::builtin_exception& x) {
    if (x.type() != nb::exception_type::value_error) throw;
    table.RaiseInvalidArgument(x.what());
  }
}

int64_t EnqueueOne(HandleTable& table, OpType op, nb::handle array,
                   nb::handle keep, nb::handle finish, std::string_view prefix,
                   std::string_view name, nb::handle reduce_op,
                   nb::handle prescale, nb::handle postscale, nb::handle root,
                   int process_set, nb::handle source) {
  nb::ndarray<> imported, imported_source;  // alive while the tensors are read
  nb::dlpack::dltensor storage, source_storage;
  const nb::dlpack::dltensor* tensor = nullptr;
  const nb::dlpack::dltensor* from = nullptr;
  PyNumbers numbers;
  try {
    numbers = TableNumbers(table, reduce_op, prescale, postscale, root);
    tensor = TensorOfArray(array, &imported, &storage);
    if (source.is_valid() && !source.is_none())
      from = TensorOfArray(source, &imported_source, &source_storage);
  } catch (const std::exception& x) {
    PyEngine* pe = table.engine();
    CollectiveArgs args;
    JoinName(prefix, name, &args.name);
    args.process_set = process_set;
    RefuseInput(pe != nullptr ? pe->engine.get() : nullptr, op, 1, args,
                x.what());
    throw;
  }
  return EnqueueTensor(table, op, *tensor, keep, finish, prefix, name,
                       numbers.reduce_op, numbers.prescale, numbers.postscale,
                       numbers.root, process_set, from,
                       from != nullptr ? source : nb::handle());
}

}  // namespace horovod
