#include "transport/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/hmac.h"

namespace horovod {
namespace {

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

Status Map(int fd, size_t bytes, char** out) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return Status::Internal(Errno("mmap of shared memory"));
  *out = static_cast<char*>(p);
  return Status::OK();
}

}  // namespace

ShmSegment::~ShmSegment() { Reset(); }

ShmSegment::ShmSegment(ShmSegment&& o) noexcept { *this = std::move(o); }

ShmSegment& ShmSegment::operator=(ShmSegment&& o) noexcept {
  if (this != &o) {
    Reset();
    data_ = o.data_;
    size_ = o.size_;
    name_ = std::move(o.name_);
    owner_ = o.owner_;
    o.data_ = nullptr;
    o.size_ = 0;
    o.owner_ = false;
  }
  return *this;
}

void ShmSegment::Reset() {
  Unlink();
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void ShmSegment::Unlink() {
  if (owner_ && !name_.empty()) shm_unlink(name_.c_str());
  owner_ = false;
}

Status ShmSegment::Create(size_t bytes, ShmSegment* out) {
  uint8_t raw[12];
  if (!SecureRandom(raw, sizeof(raw)))
    return Status::Internal("no secure random source");
  std::string name =
      "/hvd-" + std::to_string(getpid()) + "-" + HexEncode(raw, sizeof(raw));
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) return Status::Internal(Errno("shm_open(" + name + ")"));
  ShmSegment seg;
  seg.name_ = name;
  seg.owner_ = true;
  // Reserve the pages now: a /dev/shm too small for `bytes` must fail here,
  // not with SIGBUS in the middle of a collective.
  Status st;
  int err = ftruncate(fd, static_cast<off_t>(bytes)) != 0
                ? errno
                : posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0)
    st = Status::Internal(
        "cannot reserve " + std::to_string(bytes) +
        " bytes of shared memory in /dev/shm: " + std::strerror(err));
  if (st.ok()) st = Map(fd, bytes, &seg.data_);
  close(fd);
  if (!st.ok()) return st;  // seg's destructor unlinks the name
  seg.size_ = bytes;
  std::memset(seg.data_, 0, bytes);
  *out = std::move(seg);
  return Status::OK();
}

bool ShmSegment::ValidName(const std::string& name) {
  return name.size() >= 2 && name.size() <= 64 && name[0] == '/' &&
         name.find('/', 1) == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Status ShmSegment::Attach(const std::string& name, size_t bytes,
                          ShmSegment* out) {
  if (!ValidName(name))
    return Status::InvalidArgument("malformed shared memory name");
  int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Status::Internal(Errno("shm_open(" + name + ")"));
  struct stat st_buf;
  Status st;
  if (fstat(fd, &st_buf) != 0 || static_cast<size_t>(st_buf.st_size) != bytes)
    st = Status::InvalidArgument("shared memory " + name + " has " +
                                 std::to_string(st_buf.st_size) +
                                 " bytes, expected " + std::to_string(bytes));
  ShmSegment seg;
  if (st.ok()) st = Map(fd, bytes, &seg.data_);
  close(fd);
  if (!st.ok()) return st;
  seg.size_ = bytes;
  seg.name_ = name;
  *out = std::move(seg);
  return Status::OK();
}

}  // namespace horovod
