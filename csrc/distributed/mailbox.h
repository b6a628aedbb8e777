// Where the ranks of a process group that all run on one host compare the signatures of their collectives (the
// agreement check, see tpu_dist.h): a small POSIX shared-memory segment with two slots per rank, instead of a Gloo
// all-gather per collective (a round trip of ~0.5-1 ms through the loopback on a small VM, as long as the
// collective itself for payloads up to a few MiB).
//
// Collective number n uses slot n % 2 of every rank. A rank writes its signature, then publishes n + 1 in the slot's
// counter; the others read the slot once the counter says n + 1. A rank can overwrite its slot of parity n % 2 only
// at collective n + 2, which it reaches after everyone has posted n + 1, i.e. after everyone has read the slots of
// n: two slots are enough.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu {

using Signature = std::array<int64_t, 5>;  // op, tensor count, dtype, elements, shape hash

class SharedMailbox {
 public:
  // Maps the segment `name` ("/..."), creating it (rank 0) or opening the one rank 0 created. Throws naming the
  // system call that failed.
  SharedMailbox(std::string name, int rank, int size, bool create);
  ~SharedMailbox();
  SharedMailbox(const SharedMailbox&) = delete;
  SharedMailbox& operator=(const SharedMailbox&) = delete;

  // Removes the segment's name once every rank has mapped it (the mappings stay valid).
  void unlink() const;
  const std::string& name() const { return name_; }

  // Publishes this rank's signature of collective `seq`.
  void post(uint64_t seq, const Signature& mine);
  // Every rank's signature of collective `seq`, by rank, once all have posted it. Throws naming the ranks that did not
  // post within `timeout` (a rank died or hangs, or the ranks issue different numbers of collectives).
  std::vector<Signature> gather(uint64_t seq, std::chrono::milliseconds timeout) const;

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> posted;  // seq + 1 of the signature in `sig`; 0: none yet
    int64_t sig[5];
  };
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "the mailbox needs lock-free 64-bit atomics");
  Slot& slot(int rank, uint64_t seq) const { return slots_[2 * rank + static_cast<int>(seq & 1)]; }

  std::string name_;
  int rank_;
  int size_;
  size_t bytes_ = 0;
  void* base_ = nullptr;
  Slot* slots_ = nullptr;
};

}  // namespace torch_tpu
