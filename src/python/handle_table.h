// HandleTable: the integer handles of upstream's Python API (what
// `allreduce_async_` returns and `synchronize` takes), each mapped to the
// engine handles behind it, the arrays that must stay alive while the engine
// reads and writes them, and the adapter's `finish`, which turns finished
// engine handles into the framework's result. Kept in C++ because a
// per-gradient call crosses it twice: filing and collecting here costs a
// fraction of the Python frames, tuples and dict entries it replaces.
//
// Owns references to the Python objects it files until they are collected.
// Thread-safety: every method runs holding the GIL, which guards the table;
// Synchronize releases it only to wait, after the entry left the table.
#ifndef HOROVOD_PYTHON_HANDLE_TABLE_H_
#define HOROVOD_PYTHON_HANDLE_TABLE_H_

#include <horovod/engine.h>
#include <nanobind/nanobind.h>

#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace horovod {

struct PyEngine;

class HandleTable {
 public:
  // The exception types bad input and a failed operation raise.
  HandleTable(nanobind::object invalid_argument_error,
              nanobind::object internal_error);
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Raises `st` (not OK) as the type its code maps to.
  [[noreturn]] void Raise(const Status& st) const;
  [[noreturn]] void RaiseInvalidArgument(const char* message) const;

  // Files an operation's engine handles (a sequence of Handle objects) and
  // returns its number; Synchronize then returns finish(core_handles), or
  // `arrays` when finish is None.
  int64_t Add(nanobind::object core_handles, nanobind::object finish,
              nanobind::object arrays);
  // The same for one engine handle, which becomes a Python object only if
  // `finish` needs it, in two calls: Reserve gives the handle the next
  // number will hold, for the caller to enqueue into where it lies (so
  // filing moves no handle); FileReserved files it, taking references to
  // `finish` (None or null: none), `arrays` and `source` (null: none; an
  // out-of-place operation's input, kept alive until collected, as the
  // engine reads it until the handle finishes). A reserved handle left
  // unset (a refused enqueue) files nothing. Nothing else may file or
  // collect between the two.
  Handle* Reserve();
  int64_t FileReserved(nanobind::handle finish, nanobind::handle arrays,
                       nanobind::handle source = nanobind::handle());
  // The engine that enqueue_one submits to (null before init and after
  // shutdown), bound by the adapter's engine listener so that a call
  // passes no engine and reads no property; `owner` is the Python object
  // that holds it (None with a null engine).
  void Bind(nanobind::object owner, PyEngine* engine) {
    engine_owner_ = std::move(owner);
    engine_ = engine;
  }
  PyEngine* engine() const { return engine_; }

  // True once every engine handle of `number` finished; ValueError for a
  // number that is unknown or already synchronized.
  bool Poll(int64_t number) const;
  // Waits for the operation and returns its result. A number that is
  // unknown or already synchronized returns None, as upstream. A failed
  // operation raises `internal_error` with the engine's message.
  nanobind::object Synchronize(int64_t number);

 private:
  // A filed operation. It owns a reference to each Python object it
  // names, counted by hand: filing takes one, collecting hands `arrays`'
  // on as the result. A per-gradient call then counts one reference where
  // nanobind objects moved through the table would count several, each a
  // call. Moving one out leaves the source holding nothing; moving one in
  // swaps, so what the target held is released with the source.
  struct Entry {
    Handle one;                  // a reserved handle (core is null)
    PyObject* core = nullptr;    // Add's sequence of handles
    PyObject* finish = nullptr;  // null: the result is `arrays`
    PyObject* arrays = nullptr;
    PyObject* source = nullptr;  // null: in place
    Entry() = default;
    Entry(Entry&& o) noexcept
        : one(std::move(o.one)),
          core(std::exchange(o.core, nullptr)),
          finish(std::exchange(o.finish, nullptr)),
          arrays(std::exchange(o.arrays, nullptr)),
          source(std::exchange(o.source, nullptr)) {}
    Entry& operator=(Entry&& o) noexcept {
      std::swap(one, o.one);
      std::swap(core, o.core);
      std::swap(finish, o.finish);
      std::swap(arrays, o.arrays);
      std::swap(source, o.source);
      return *this;
    }
    ~Entry() {
      Py_XDECREF(core);
      Py_XDECREF(finish);
      Py_XDECREF(arrays);
      Py_XDECREF(source);
    }
    // Holds a number's entry: every filed one has its handle or handles
    // (a ring slot moved out of holds neither).
    bool filed() const { return one.valid() || core != nullptr; }
  };

  int64_t File(Entry entry);
  // The entry filed under `number`, or null.
  Entry* Find(int64_t number);
  const Entry* Find(int64_t number) const {
    return const_cast<HandleTable*>(this)->Find(number);
  }
  // Makes the ring reach `number`: doubles it up to kMaxRing, then moves
  // the oldest entries still filed to `older_`.
  void MakeRoom(int64_t number);
  // Waits for `h`; a failed operation raises `internal_error`.
  void Wait(const Handle& h) const;
  [[noreturn]] void RaiseAs(const nanobind::object& type,
                            const char* message) const;

  static constexpr size_t kFirstRing = 1024;
  static constexpr size_t kMaxRing = size_t{1} << 16;

  nanobind::object invalid_argument_error_;
  nanobind::object internal_error_;
  nanobind::object engine_owner_;
  PyEngine* engine_ = nullptr;
  // Numbers are handed out in order and mostly synchronized in order: the
  // entries of numbers from base_ up to next_ lie in a ring indexed by
  // number (a power of two long), so filing and collecting one hashes
  // nothing and, in a steady step, allocates nothing. A number that the
  // ring had to move past while still filed (one never synchronized, or
  // far behind) waits in `older_`.
  std::vector<Entry> ring_;
  int64_t base_ = 0;
  std::unordered_map<int64_t, Entry> older_;
  int64_t next_ = 0;
};

}  // namespace horovod

#endif  // HOROVOD_PYTHON_HANDLE_TABLE_H_
