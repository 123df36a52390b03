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
  args->op = static_cast<ReduceOp>(reduce_op);
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

int64_t EnqueueTensor(HandleTable& table, OpType op,
                      const nb::dlpack::dltensor& tensor, nb::handle keep,
                      nb::handle finish, std::string_view prefix,
                      std::string_view name, int reduce_op, double prescale,
                      double postscale, int root, int process_set) {
  PyEngine* pe = table.engine();
  if (pe == nullptr)
    throw nb::value_error("Horovod has not been initialized; use hvd.init().");
  TensorView& view = pe->view;
  CollectiveArgs& args = pe->args;
  Engine* eng = nullptr;
  try {
    eng = &pe->get();
    dlpack::ToView(tensor, pe->rank, &view);
  } catch (const nb::builtin_exception& x) {
    table.RaiseInvalidArgument(x.what());
  }
  JoinName(prefix, name, &args.name);
  SetArgs(&args, reduce_op, prescale, postscale, root, process_set);
  Status st = eng->Enqueue(op, view, args, table.Reserve());
  if (!st.ok()) table.Raise(st);
  return table.FileReserved(finish, keep);
}

int64_t EnqueueOne(HandleTable& table, OpType op, nb::handle array,
                   nb::handle keep, nb::handle finish, std::string_view prefix,
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
  return EnqueueTensor(table, op, *tensor, keep, finish, prefix, name,
                       reduce_op, prescale, postscale, root, process_set);
}

}  // namespace horovod
