#include "backend/storage.h"
#include "exec/device_tensor.h"

#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <array>
#include <mutex>
#include <vector>
#include <unordered_map>

#include "exec/state.h"

namespace torch_tpu {
namespace {

constexpr int kMaxDevices = 64;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatType;

struct DeviceCounters {
  std::mutex mu;
  c10::CachingDeviceAllocator::DeviceStats stats;
};

std::array<DeviceCounters, kMaxDevices>& counters() {
  static std::array<DeviceCounters, kMaxDevices> c;
  return c;
}

void for_all(c10::CachingAllocator::StatArray& a, int64_t amount) {
  for (auto& s : a) {
    if (amount >= 0) {
      s.increase(amount);
    } else {
      s.decrease(-amount);
    }
  }
}

void book(DeviceCounters& c, int64_t nbytes, bool alloc) {
  int64_t sign = alloc ? 1 : -1;
  for_all(c.stats.allocated_bytes, sign * nbytes);
  for_all(c.stats.active_bytes, sign * nbytes);
  for_all(c.stats.requested_bytes, sign * nbytes);
  for_all(c.stats.reserved_bytes, sign * nbytes);
  for_all(c.stats.allocation, sign);
  for_all(c.stats.active, sign);
  for_all(c.stats.segment, sign);
  if (alloc) {
    c.stats.num_device_alloc++;
  } else {
    c.stats.num_device_free++;
  }
}

void account(int device, int64_t nbytes, bool alloc) {
  auto& c = counters()[device];
  std::lock_guard<std::mutex> lock(c.mu);
  book(c, nbytes, alloc);
}

// Books `nbytes` on `device` (unless `deferred`: then only checks) if they fit in `capacity` next to what is
// allocated; otherwise counts an OOM and throws torch.OutOfMemoryError at this allocation (as CUDA's caching
// allocator does), leaving the statistics unchanged.
void reserve(int device, int64_t nbytes, int64_t capacity, bool deferred) {
  auto& c = counters()[device];
  int64_t in_use = 0;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    in_use = c.stats.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
    if (nbytes <= capacity - in_use) {
      if (!deferred) book(c, nbytes, true);
      return;
    }
    c.stats.num_ooms++;
  }
  constexpr double kGiB = 1 << 30;
  TORCH_CHECK_WITH(OutOfMemoryError, false, "TPU out of memory. Tried to allocate ",
                   static_cast<double>(nbytes) / kGiB, " GiB. tpu:", device, " has a total capacity of ",
                   static_cast<double>(capacity) / kGiB, " GiB of which ",
                   static_cast<double>(std::max<int64_t>(capacity - in_use, 0)) / kGiB, " GiB is free. ",
                   static_cast<double>(in_use) / kGiB, " GiB is allocated by PyTorch.");
}

// Addresses for data_ptr()s: one PROT_NONE reservation made once, cut into 512-byte aligned ranges; freed
// ranges are reused by the next allocation of the same rounded size (training loops allocate the same sizes every
// step). No system call per tensor. When the reservation runs out, ranges come from mmap one by one.
class AddressSpace {
 public:
  static constexpr size_t kAlign = 512;
  static constexpr size_t kSpan = size_t{1} << 40;  // address space only: never committed

  // Returns {address, mapped}: mapped ranges came from their own mmap (the reservation was full).
  std::pair<void*, bool> take(size_t bytes) {
    size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        uintptr_t a = it->second.back();
        it->second.pop_back();
        return {reinterpret_cast<void*>(a), false};
      }
      if (base_ == 0 && !failed_) {
        void* r = ::mmap(nullptr, kSpan, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (r == MAP_FAILED) {
          failed_ = true;
        } else {
          base_ = reinterpret_cast<uintptr_t>(r);
        }
      }
      if (base_ != 0 && used_ + size <= kSpan) {
        uintptr_t a = base_ + used_;
        used_ += size;
        return {reinterpret_cast<void*>(a), false};
      }
    }
    void* a = ::mmap(nullptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return {a == MAP_FAILED ? nullptr : a, true};
  }

  void give_back(void* address, size_t bytes, bool mapped) noexcept {
    size_t size = rounded(bytes);
    if (mapped) {
      ::munmap(address, size);
      return;
    }
    try {
      std::lock_guard<std::mutex> lock(mu_);
      free_[size].push_back(reinterpret_cast<uintptr_t>(address));
    } catch (...) {  // out of host memory for the free list: the range is simply not reused
    }
  }

 private:
  static size_t rounded(size_t bytes) { return (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign; }

  std::mutex mu_;
  uintptr_t base_ = 0;
  size_t used_ = 0;
  bool failed_ = false;
  std::unordered_map<size_t, std::vector<uintptr_t>> free_;
};

AddressSpace& address_space() {
  static AddressSpace* space = new AddressSpace();  // never destroyed: storages may outlive static destruction
  return *space;
}

// A DataPtr's context: the device contents plus the reserved address range.
struct Allocation final : DeviceData {
  void* address;
  size_t reserved;
  bool mapped;
  Allocation(int device, int64_t nbytes, void* addr, size_t reserved_bytes, bool own_mapping)
      : DeviceData(device, nbytes), address(addr), reserved(reserved_bytes), mapped(own_mapping) {}
  void book_bytes(bool add) override { account(device(), nbytes(), add); }
};

void delete_allocation(void* ctx) {
  auto* a = static_cast<Allocation*>(static_cast<DeviceData*>(ctx));
  unregister_device_address(a->address);
  if (a->booked()) account(a->device(), a->nbytes(), false);
  address_space().give_back(a->address, a->reserved, a->mapped);
  delete a;
}

}  // namespace

int64_t TpuAllocator::device_capacity(int device) {
  check_device_index(device);
  return backend_state().capacity[device];
}

c10::DataPtr TpuAllocator::allocate(size_t nbytes) {
  int device = current_device();
  check_device_index(device);
  const bool deferred = DeferredBooking::active();  // a result of the open graph: booked once it has contents
  reserve(device, static_cast<int64_t>(nbytes), device_capacity(device), deferred);
  // Reserve (never commit) an address range: unique data_ptr()s that fault if anything dereferences them.
  size_t reserved = nbytes == 0 ? 1 : nbytes;
  auto [address, mapped] = address_space().take(reserved);
  if (address == nullptr) {
    if (!deferred) account(device, static_cast<int64_t>(nbytes), false);
    TORCH_CHECK_WITH(OutOfMemoryError, false, "TPU out of memory: could not reserve ", nbytes,
                     " bytes of address space on tpu:", device);
  }
  auto* a = new Allocation(device, static_cast<int64_t>(nbytes), address, reserved, mapped);
  if (deferred) a->start_unbooked();
  register_device_address(address, nbytes, a);
  return {address, static_cast<DeviceData*>(a), &delete_allocation,
          c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device))};
}

void TpuAllocator::copy_data(void* dest, const void* src, std::size_t count) const {
  TORCH_CHECK(false, "tpu memory has no host address: copy tpu tensors with Tensor.copy_ instead of raw bytes");
}

c10::CachingDeviceAllocator::DeviceStats TpuAllocator::getDeviceStats(c10::DeviceIndex device) {
  auto& c = counters().at(device);
  std::lock_guard<std::mutex> lock(c.mu);
  return c.stats;
}

// The statistics this allocator keeps (the rest of DeviceStats stays zero).
template <class Fn>
void for_each_kept_stat(c10::CachingDeviceAllocator::DeviceStats& stats, const Fn& fn) {
  for (auto* a : {&stats.allocated_bytes, &stats.active_bytes, &stats.requested_bytes, &stats.reserved_bytes,
                  &stats.allocation, &stats.active, &stats.segment}) {
    for (auto& stat : *a) fn(stat);
  }
}

void TpuAllocator::resetAccumulatedStats(c10::DeviceIndex device) {
  auto& c = counters().at(device);
  std::lock_guard<std::mutex> lock(c.mu);
  for_each_kept_stat(c.stats, [](Stat& s) { s.reset_accumulated(); });
  c.stats.num_device_alloc = 0;
  c.stats.num_device_free = 0;
}

void TpuAllocator::resetPeakStats(c10::DeviceIndex device) {
  auto& c = counters().at(device);
  std::lock_guard<std::mutex> lock(c.mu);
  for_each_kept_stat(c.stats, [](Stat& s) { s.reset_peak(); });
}

std::pair<size_t, size_t> TpuAllocator::getMemoryInfo(c10::DeviceIndex device) {
  int64_t total = device_capacity(device);
  int64_t used = getDeviceStats(device).allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
  return {static_cast<size_t>(std::max<int64_t>(total - used, 0)), static_cast<size_t>(total)};
}

TpuAllocator& tpu_allocator() {
  static TpuAllocator allocator;
  return allocator;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &tpu_allocator());

namespace {
// exec/ allocates program results through this one allocator, never through the dispatcher.
const bool g_installed = (install_device_allocator(&tpu_allocator()), true);
}  // namespace

}  // namespace torch_tpu
