#include "python/handle_table.h"

#include <string>
#include <utility>

namespace nb = nanobind;

namespace horovod {

HandleTable::HandleTable(nb::object invalid_argument_error,
                         nb::object internal_error)
    : invalid_argument_error_(std::move(invalid_argument_error)),
      internal_error_(std::move(internal_error)),
      engine_(nb::none()) {}

void HandleTable::Raise(const Status& st) const {
  RaiseAs(st.code() == StatusCode::kInvalidArgument ? invalid_argument_error_
                                                    : internal_error_,
          st.message().c_str());
}

void HandleTable::RaiseInvalidArgument(const char* message) const {
  RaiseAs(invalid_argument_error_, message);
}

void HandleTable::RaiseAs(const nb::object& type, const char* message) const {
  PyErr_SetString(type.ptr(), message);
  throw nb::python_error();
}

int64_t HandleTable::Add(nb::object core_handles, nb::object finish,
                         nb::object arrays) {
  return File({Handle(), std::move(core_handles), std::move(finish),
               std::move(arrays)});
}

int64_t HandleTable::AddOne(Handle handle, nb::object finish,
                            nb::object arrays) {
  return File(
      {std::move(handle), nb::object(), std::move(finish), std::move(arrays)});
}

int64_t HandleTable::File(Entry entry) {
  const int64_t number = next_++;
  if (spare_.empty()) {
    entries_.emplace(number, std::move(entry));
    return number;
  }
  Entries::node_type node = std::move(spare_.back());
  spare_.pop_back();
  node.key() = number;
  node.mapped() = std::move(entry);
  entries_.insert(std::move(node));
  return number;
}

bool HandleTable::Poll(int64_t number) const {
  auto it = entries_.find(number);
  if (it == entries_.end())
    throw nb::value_error(
        ("unknown or already synchronized handle " + std::to_string(number))
            .c_str());
  const Entry& e = it->second;
  if (!e.core.is_valid()) return e.one.Poll();
  for (nb::handle h : e.core)
    if (!nb::cast<const Handle&>(h).Poll()) return false;
  return true;
}

nb::object HandleTable::Synchronize(int64_t number) {
  auto it = entries_.find(number);
  if (it == entries_.end()) return nb::none();
  Entries::node_type node = entries_.extract(it);
  Entry e = std::move(node.mapped());  // leaves the node holding nothing
  spare_.push_back(std::move(node));
  if (e.core.is_valid()) {
    for (nb::handle h : e.core) Wait(nb::cast<const Handle&>(h));
  } else {
    Wait(e.one);
  }
  if (e.finish.is_none()) return std::move(e.arrays);
  if (!e.core.is_valid()) e.core = nb::make_tuple(std::move(e.one));
  return e.finish(e.core);
}

void HandleTable::Wait(const Handle& h) const {
  Status st;
  if (h.Poll()) {  // done: nothing to wait for, keep the GIL
    st = h.Wait();
  } else {
    nb::gil_scoped_release release;
    st = h.Wait();
  }
  if (!st.ok()) RaiseAs(internal_error_, st.message().c_str());
}

}  // namespace horovod
