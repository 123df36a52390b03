// ShmSegment: one POSIX shared-memory object mapped into this process. The
// creator sizes it and touches every page up front (first touch is slow on
// this class of VM, so no transfer should pay it); attachers map an existing
// one by name. The name is removed with Unlink as soon as every peer has
// attached, so a crash afterwards leaves nothing in /dev/shm: the memory
// lives only as long as some process maps it.
//
// Ownership: unmaps on destruction. Not thread-safe; set up once, then the
// mapped bytes are shared by design (see ShmGroup for the protocol).
#ifndef HOROVOD_TRANSPORT_SHM_SEGMENT_H_
#define HOROVOD_TRANSPORT_SHM_SEGMENT_H_

#include <horovod/status.h>

#include <cstddef>
#include <string>

namespace horovod {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment();
  ShmSegment(ShmSegment&& o) noexcept;
  ShmSegment& operator=(ShmSegment&& o) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates a fresh object with an unguessable name, readable only by this
  // user, of `bytes` bytes, every page touched.
  static Status Create(size_t bytes, ShmSegment* out);
  // Maps an existing object; fails unless it is exactly `bytes` long.
  static Status Attach(const std::string& name, size_t bytes, ShmSegment* out);
  // Whether a name received from a peer may be opened: "/x" with no further
  // '/', at most 64 characters (never a path elsewhere).
  static bool ValidName(const std::string& name);

  // Removes the name (the mapping stays valid). Idempotent.
  void Unlink();

  char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void Reset();

  char* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool owner_ = false;
};

}  // namespace horovod

#endif  // HOROVOD_TRANSPORT_SHM_SEGMENT_H_
