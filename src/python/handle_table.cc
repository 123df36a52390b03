#include "python/handle_table.h"

#include <string>
#include <utility>

namespace nb = nanobind;

namespace horovod {

HandleTable::HandleTable(nb::object invalid_argument_error,
                         nb::object internal_error)
    : invalid_argument_error_(std::move(invalid_argument_error)),
      internal_error_(std::move(internal_error)),
      engine_owner_(nb::none()) {}

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
  Entry e;
  e.core = core_handles.release().ptr();
  if (!finish.is_none()) e.finish = finish.release().ptr();
  e.arrays = arrays.release().ptr();
  return File(std::move(e));
}

Handle* HandleTable::Reserve() {
  if (static_cast<size_t>(next_ - base_) >= ring_.size()) MakeRoom(next_);
  return &ring_[static_cast<size_t>(next_) & (ring_.size() - 1)].one;
}

int64_t HandleTable::FileReserved(nb::handle finish, nb::handle arrays,
                                  nb::handle source) {
  Entry& e = ring_[static_cast<size_t>(next_) & (ring_.size() - 1)];
  if (finish.is_valid() && !finish.is_none()) e.finish = finish.inc_ref().ptr();
  e.arrays = arrays.inc_ref().ptr();
  if (source.is_valid()) e.source = source.inc_ref().ptr();
  return next_++;
}

int64_t HandleTable::File(Entry entry) {
  const int64_t number = next_++;
  if (static_cast<size_t>(number - base_) >= ring_.size()) MakeRoom(number);
  ring_[static_cast<size_t>(number) & (ring_.size() - 1)] = std::move(entry);
  return number;
}

void HandleTable::MakeRoom(int64_t number) {
  while (static_cast<size_t>(number - base_) >= ring_.size() &&
         ring_.size() < kMaxRing) {
    std::vector<Entry> bigger(ring_.empty() ? kFirstRing : 2 * ring_.size());
    for (int64_t n = base_; n < number; ++n)
      bigger[static_cast<size_t>(n) & (bigger.size() - 1)] =
          std::move(ring_[static_cast<size_t>(n) & (ring_.size() - 1)]);
    ring_.swap(bigger);
  }
  for (; static_cast<size_t>(number - base_) >= ring_.size(); ++base_) {
    Entry& e = ring_[static_cast<size_t>(base_) & (ring_.size() - 1)];
    if (e.filed()) older_.emplace(base_, std::move(e));
  }
}

HandleTable::Entry* HandleTable::Find(int64_t number) {
  if (number >= base_ && number < next_) {
    Entry& e = ring_[static_cast<size_t>(number) & (ring_.size() - 1)];
    return e.filed() ? &e : nullptr;
  }
  auto it = older_.find(number);
  return it == older_.end() ? nullptr : &it->second;
}

bool HandleTable::Poll(int64_t number) const {
  const Entry* found = Find(number);
  if (found == nullptr)
    throw nb::value_error(
        ("unknown or already synchronized handle " + std::to_string(number))
            .c_str());
  const Entry& e = *found;
  if (e.core == nullptr) return e.one.Poll();
  for (nb::handle h : nb::handle(e.core))
    if (!nb::cast<const Handle&>(h).Poll()) return false;
  return true;
}

nb::object HandleTable::Synchronize(int64_t number) {
  Entry* found = Find(number);
  if (found == nullptr) return nb::none();
  Entry e = std::move(*found);  // leaves the slot holding nothing
  if (number >= base_) {
    while (base_ < next_ &&
           !ring_[static_cast<size_t>(base_) & (ring_.size() - 1)].filed())
      ++base_;
  } else {
    older_.erase(number);
  }
  if (e.core != nullptr) {
    for (nb::handle h : nb::handle(e.core)) Wait(nb::cast<const Handle&>(h));
  } else {
    Wait(e.one);
  }
  if (e.finish == nullptr) return nb::steal(std::exchange(e.arrays, nullptr));
  nb::object core =
      e.core != nullptr ? nb::borrow(e.core) : nb::make_tuple(std::move(e.one));
  return nb::handle(e.finish)(core);
}

void HandleTable::Wait(const Handle& h) const {
  if (h.Poll()) {  // done: nothing to wait for, keep the GIL, copy nothing
    const Status& st = h.status();
    if (!st.ok()) RaiseAs(internal_error_, st.message().c_str());
    return;
  }
  Status st;
  {
    nb::gil_scoped_release release;
    st = h.Wait();
  }
  if (!st.ok()) RaiseAs(internal_error_, st.message().c_str());
}

}  // namespace horovod
