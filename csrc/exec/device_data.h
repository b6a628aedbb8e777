// The device contents of a tpu storage: a 1-D PJRT buffer (any element type; readers bitcast), nothing yet (an
// uninitialised storage reads as zeros) or a pending graph value. It is the context of the storage's DataPtr (see
// backend/storage.h).
#pragma once

#include <c10/core/Storage.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "runtime/buffer.h"

namespace torch_tpu {

// Held exclusively by a program that donates storages' old buffers, from deciding to donate until the new buffers
// are in place; every reader of a storage's buffer holds it shared. So no thread can pick up a buffer that another
// thread's program is about to consume.
std::shared_mutex& donation_mutex();

// Runs the device's open graph (fused mode), so every storage it writes holds its buffer. Defined in exec/graph.cpp.
void flush_device(int device);
// Held by whatever reads storages of `device` to replace their contents: the open graph while it records or runs, a
// program of its own from construction to run, a compiled graph's replay. A storage update (read the old buffer,
// write the new one, swap) is then atomic with respect to every other writer on any thread: two threads writing
// disjoint rows of one tensor both land. Recursive: a program may run the open graph first. Defined in
// exec/graph.cpp.
std::recursive_mutex& device_mutex(int device);
// A storage that dies while its device's open graph still refers to it: the graph drops it (a dead storage is
// never an output). Defined in exec/graph.cpp.
void forget_in_graph(int device, const void* data);

// The device contents of a storage. In fused mode they may be *pending*: a value of the device's open graph that
// has not run yet. buffer() and set_buffer() see through that (they run the graph first), so code above exec/ never
// cares; the graph itself uses the raw accessors.
class DeviceData {
 public:
  DeviceData(int device, int64_t nbytes) : device_(device), nbytes_(nbytes) {}
  virtual ~DeviceData() {
    if (membership_.load() != kNone) forget_in_graph(device_, this);
  }

  int device() const { return device_; }
  // Adds (or removes) this storage's bytes to the allocator's statistics; the allocator's storages override it.
  virtual void book_bytes(bool add) {}
  int64_t nbytes() const { return nbytes_; }
  bool valid() const { return magic_ == kMagic; }

  // A pending storage's graph runs before its buffer is handed out; any storage the graph refers to has its graph
  // run before its buffer is replaced from outside (the graph's reads come first in program order).
  std::shared_ptr<Buffer> buffer() const {
    if (membership_.load() == kWritten) flush_device(device_);
    return raw_buffer();
  }
  void set_buffer(std::shared_ptr<Buffer> buffer) {
    if (membership_.load() != kNone) flush_device(device_);
    raw_set_buffer(std::move(buffer));
  }

  // For the open graph (exec/) only.
  std::shared_ptr<Buffer> raw_buffer() const {
    std::shared_lock<std::shared_mutex> donating(donation_mutex());
    std::lock_guard<std::mutex> lock(mu_);
    return buffer_;
  }
  // As raw_buffer(), for a caller that holds donation_mutex() exclusively.
  std::shared_ptr<Buffer> raw_buffer_donating() const {
    std::lock_guard<std::mutex> lock(mu_);
    return buffer_;
  }
  void raw_set_buffer(std::shared_ptr<Buffer> buffer) {
    if (buffer && unbooked_.exchange(false)) book_bytes(true);  // first contents of a deferred storage
    std::lock_guard<std::mutex> lock(mu_);
    buffer_ = std::move(buffer);
  }

  // Memory accounting (the allocator's statistics). A storage created inside the open graph is booked only when it
  // gets device contents: one that dies before the graph runs never occupied device memory.
  bool booked() const { return !unbooked_.load(); }
  // For the allocator: a storage made under DeferredBooking starts unbooked (it was never counted).
  void start_unbooked() { unbooked_.store(true); }
  // Whether the device's open graph refers to this storage: not at all, reads it, or writes it (pending).
  static constexpr int kNone = 0, kRead = 1, kWritten = 2;
  void set_membership(int m) { membership_.store(m); }
  int membership() const { return membership_.load(); }

 private:
  static constexpr uint32_t kMagic = 0x7470755f;  // "tpu_": guards against foreign DataPtr contexts
  uint32_t magic_ = kMagic;
  int device_;
  int64_t nbytes_;
  std::atomic<int> membership_{kNone};
  std::atomic<bool> unbooked_{false};
  mutable std::mutex mu_;
  std::shared_ptr<Buffer> buffer_;
};

// While one is alive on a thread (and `on`), the tpu storages the thread allocates start unbooked: results of the
// open graph, which occupy device memory only once the graph gives them contents, never count towards the
// allocator's statistics (or its peak) before that.
class DeferredBooking {
 public:
  explicit DeferredBooking(bool on) : saved_(active_) { active_ = saved_ || on; }
  ~DeferredBooking() { active_ = saved_; }
  DeferredBooking(const DeferredBooking&) = delete;
  DeferredBooking& operator=(const DeferredBooking&) = delete;
  static bool active() { return active_; }

 private:
  inline static thread_local bool active_ = false;
  bool saved_;
};

// The allocator records the address range of every live allocation, so a storage that wraps a tpu data_ptr() in a
// foreign DataPtr (a DLPack import: at::fromDLPack builds one around the exporter's pointer) finds its DeviceData.
void register_device_address(const void* base, size_t nbytes, DeviceData* data);
void unregister_device_address(const void* base);
// The DeviceData of a storage whose DataPtr is not torch_tpu's: the allocation that starts at its address (the
// storage then spans the whole allocation); throws naming the cause when there is none.
DeviceData& imported_device_data(const c10::Storage& storage);

// The DeviceData behind a tpu storage (throws for storages of other devices or other allocators).
inline DeviceData& device_data(const c10::Storage& storage) {
  const c10::DataPtr& ptr = storage.data_ptr();
  TORCH_CHECK(ptr.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu storage, got one on ",
              ptr.device());
  auto* data = static_cast<DeviceData*>(ptr.get_context());
  if (data != nullptr && data->valid()) return *data;
  return imported_device_data(storage);
}

}  // namespace torch_tpu
