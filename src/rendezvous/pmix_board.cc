#include "rendezvous/pmix_board.h"

#include <dlfcn.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace horovod {
namespace {

// The few pieces of PMIx's C interface the board uses, declared from the
// PMIx standard (its ABI is stable within a major version; libpmix.so.2).
struct PmixProc {
  char nspace[256];
  uint32_t rank;
};
constexpr uint16_t kPmixString = 3;
constexpr uint8_t kPmixGlobal = 3;
constexpr int kPmixSuccess = 0;
// What a Get of a peer on this node returns before that peer has posted:
// unlike a remote peer's key, it is not waited for, so the board polls.
constexpr int kPmixErrNotFound = -46;
// pmix_value_t is a 2-byte type tag and an 8-byte-aligned union; the board
// only writes and reads its string member. 64 bytes holds the whole value.
struct alignas(8) PmixValue {
  uint16_t type;
  char pad[6];
  union {
    char* string;
    char bytes[56];
  } data;
};

using InitFn = int (*)(PmixProc*, void*, size_t);
using FinalizeFn = int (*)(const void*, size_t);
using PutFn = int (*)(uint8_t, const char*, PmixValue*);
using CommitFn = int (*)();
using GetFn = int (*)(const PmixProc*, const char*, const void*, size_t,
                      PmixValue**);
using ValueFreeFn = void (*)(PmixValue*, size_t);

}  // namespace

struct PmixBoard::Library {
  void* handle = nullptr;
  InitFn init = nullptr;
  FinalizeFn finalize = nullptr;
  PutFn put = nullptr;
  CommitFn commit = nullptr;
  GetFn get = nullptr;
  ValueFreeFn value_free = nullptr;  // absent before PMIx 4
  PmixProc me{};
  bool joined = false;
  int helpers_running = 0;  // guarded by PmixBoard's waits (one at a time)
};

PmixBoard::PmixBoard() = default;

PmixBoard::~PmixBoard() {
  // A helper still inside PMIx_Get keeps the library; finalizing under it
  // would pull the client out from beneath that call.
  if (lib_ && lib_->joined && lib_->helpers_running == 0 && lib_->finalize)
    lib_->finalize(nullptr, 0);
}

bool PmixBoard::Available() {
  return std::getenv("PMIX_RANK") != nullptr &&
         (std::getenv("PMIX_SERVER_URI41") != nullptr ||
          std::getenv("PMIX_SERVER_URI4") != nullptr ||
          std::getenv("PMIX_SERVER_URI3") != nullptr ||
          std::getenv("PMIX_SERVER_URI2") != nullptr);
}

Status PmixBoard::Open() {
  auto lib = std::make_shared<Library>();
  for (const char* name : {"libpmix.so.2", "libpmix.so"}) {
    lib->handle = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (lib->handle != nullptr) break;
  }
  if (lib->handle == nullptr)
    return Status::Aborted(
        "this job was started by mpirun across hosts, and finding rank 0 "
        "there needs libpmix.so.2 (Debian: libpmix2), which did not load: " +
        std::string(dlerror()));
  auto sym = [&](const char* name) { return dlsym(lib->handle, name); };
  lib->init = reinterpret_cast<InitFn>(sym("PMIx_Init"));
  lib->finalize = reinterpret_cast<FinalizeFn>(sym("PMIx_Finalize"));
  lib->put = reinterpret_cast<PutFn>(sym("PMIx_Put"));
  lib->commit = reinterpret_cast<CommitFn>(sym("PMIx_Commit"));
  lib->get = reinterpret_cast<GetFn>(sym("PMIx_Get"));
  lib->value_free = reinterpret_cast<ValueFreeFn>(sym("PMIx_Value_free"));
  if (!lib->init || !lib->put || !lib->commit || !lib->get)
    return Status::Aborted("libpmix lacks PMIx_Init/Put/Commit/Get");
  int rc = lib->init(&lib->me, nullptr, 0);
  if (rc != kPmixSuccess)
    return Status::Aborted("PMIx_Init failed (status " + std::to_string(rc) +
                           ")");
  lib->joined = true;
  lib_ = std::move(lib);
  return Status::OK();
}

Status PmixBoard::Publish(const std::string& key, const std::string& value) {
  if (!lib_) return Status::Internal("PMIx board not open");
  PmixValue v;
  std::memset(&v, 0, sizeof v);
  v.type = kPmixString;
  std::string copy = value;
  v.data.string = copy.data();
  int rc = lib_->put(kPmixGlobal, key.c_str(), &v);
  if (rc == kPmixSuccess) rc = lib_->commit();
  if (rc != kPmixSuccess)
    return Status::Aborted("PMIx could not post " + key + " (status " +
                           std::to_string(rc) + ")");
  return Status::OK();
}

namespace {

struct GetResult {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int rc = 0;
  std::string value;
  bool wrong_type = false;
  bool abandoned = false;  // the reader's deadline passed: stop polling
};

}  // namespace

Status PmixBoard::ReadRank0(const std::string& key, Deadline deadline,
                            std::string* value) {
  if (!lib_) return Status::Internal("PMIx board not open");
  auto result = std::make_shared<GetResult>();
  auto lib = lib_;
  PmixProc rank0 = lib->me;
  rank0.rank = 0;
  ++lib->helpers_running;
  std::thread([lib, result, rank0, key] {
    PmixValue* v = nullptr;
    int rc;
    while ((rc = lib->get(&rank0, key.c_str(), nullptr, 0, &v)) ==
           kPmixErrNotFound) {
      {
        std::lock_guard<std::mutex> lock(result->mu);
        if (result->abandoned) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::lock_guard<std::mutex> lock(result->mu);
    result->rc = rc;
    if (rc == kPmixSuccess && v != nullptr) {
      if (v->type == kPmixString && v->data.string != nullptr)
        result->value.assign(v->data.string, strnlen(v->data.string, 4096));
      else
        result->wrong_type = true;
      if (lib->value_free) lib->value_free(v, 1);
    }
    result->done = true;
    result->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(result->mu);
  bool done = result->cv.wait_for(
      lock, std::chrono::milliseconds(deadline.RemainingMs()),
      [&] { return result->done; });
  if (!done) {
    result->abandoned = true;  // the helper stops polling and goes
    return Status::Timeout(
        "rank 0 did not post its address through PMIx "
        "before the start timeout");
  }
  --lib->helpers_running;
  if (result->rc != kPmixSuccess || result->wrong_type)
    return Status::Aborted("PMIx could not read rank 0's " + key + " (status " +
                           std::to_string(result->rc) + ")");
  *value = result->value;
  return Status::OK();
}

}  // namespace horovod
