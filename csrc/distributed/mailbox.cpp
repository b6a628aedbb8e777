#include "distributed/mailbox.h"

#include <c10/util/Exception.h>

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <thread>

namespace torch_tpu {
namespace {

constexpr uint64_t kMagic = 0x74707564697374ull;  // "tpudist"

struct Header {
  uint64_t magic;
  int64_t size;
};

std::string errno_text() { return std::strerror(errno); }

}  // namespace

SharedMailbox::SharedMailbox(std::string name, int rank, int size, bool create)
    : name_(std::move(name)), rank_(rank), size_(size) {
  TORCH_CHECK(size > 0 && rank >= 0 && rank < size, "tpu_dist mailbox: rank ", rank, " of ", size);
  bytes_ = sizeof(Slot) * (1 + 2 * static_cast<size_t>(size));  // the header takes the first slot's room
  int fd = create ? ::shm_open(name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : ::shm_open(name_.c_str(), O_RDWR, 0);
  TORCH_CHECK(fd >= 0, "tpu_dist mailbox: shm_open(", name_, ") failed: ", errno_text());
  if (create && ::ftruncate(fd, static_cast<off_t>(bytes_)) != 0) {
    std::string err = errno_text();
    ::close(fd);
    ::shm_unlink(name_.c_str());
    TORCH_CHECK(false, "tpu_dist mailbox: ftruncate(", name_, ") failed: ", err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes_) {
    ::close(fd);
    TORCH_CHECK(false, "tpu_dist mailbox: ", name_, " has the wrong size for ", size, " ranks");
  }
  base_ = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  TORCH_CHECK(base_ != MAP_FAILED, "tpu_dist mailbox: mmap(", name_, ") failed: ", errno_text());
  auto* header = static_cast<Header*>(base_);
  if (create) {
    header->size = size;
    header->magic = kMagic;  // the segment is zero-filled: every slot reads "nothing posted"
  } else if (header->magic != kMagic || header->size != size) {
    ::munmap(base_, bytes_);
    base_ = nullptr;
    TORCH_CHECK(false, "tpu_dist mailbox: ", name_, " was not made for this group of ", size, " ranks");
  }
  slots_ = reinterpret_cast<Slot*>(static_cast<char*>(base_) + sizeof(Slot));
}

SharedMailbox::~SharedMailbox() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

void SharedMailbox::unlink() const { ::shm_unlink(name_.c_str()); }

void SharedMailbox::post(uint64_t seq, const Signature& mine) {
  Slot& s = slot(rank_, seq);
  for (size_t i = 0; i < mine.size(); ++i) s.sig[i] = mine[i];
  s.posted.store(seq + 1, std::memory_order_release);
}

std::vector<Signature> SharedMailbox::gather(uint64_t seq, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<Signature> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const Slot& s = slot(r, seq);
    // Spin briefly (the others are usually already there), then yield the core, then sleep in short steps.
    for (int tries = 0; s.posted.load(std::memory_order_acquire) != seq + 1; ++tries) {
      if (tries < 200) {
        continue;
      }
      if (tries < 2000) {
        ::sched_yield();
        continue;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        std::ostringstream missing;
        for (int m = r; m < size_; ++m) {
          if (slot(m, seq).posted.load(std::memory_order_acquire) != seq + 1) missing << (m == r ? "" : ", ") << m;
        }
        TORCH_CHECK(false, "tpu_dist: rank(s) ", missing.str(), " did not reach collective #", seq, " within ",
                    timeout.count(), " ms (a rank died or hangs, or the ranks issue different numbers of collectives)");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    for (size_t i = 0; i < Signature().size(); ++i) all[static_cast<size_t>(r)][i] = s.sig[i];
  }
  return all;
}

}  // namespace torch_tpu
