#include "exec/device_data.h"

#include <cstdint>
#include <map>

namespace torch_tpu {
namespace {

struct Range {
  size_t nbytes;
  DeviceData* data;
};

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

std::map<uintptr_t, Range>& registry() {
  static auto* r = new std::map<uintptr_t, Range>();  // leaked: storages may die during static destruction
  return *r;
}

}  // namespace

void register_device_address(const void* base, size_t nbytes, DeviceData* data) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry()[reinterpret_cast<uintptr_t>(base)] = Range{nbytes, data};
}

void unregister_device_address(const void* base) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  registry().erase(reinterpret_cast<uintptr_t>(base));
}

DeviceData& imported_device_data(const c10::Storage& storage) {
  auto address = reinterpret_cast<uintptr_t>(storage.data_ptr().get());
  DeviceData* data = nullptr;
  size_t base_offset = 0;
  size_t allocation_nbytes = 0;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    auto& r = registry();
    auto it = r.upper_bound(address);
    if (it != r.begin()) {
      --it;
      if (address < it->first + std::max<size_t>(it->second.nbytes, 1)) {
        data = it->second.data;
        base_offset = address - it->first;
        allocation_nbytes = it->second.nbytes;
      }
    }
  }
  TORCH_CHECK(data != nullptr,
              "tpu storage was not allocated by torch_tpu's allocator (a DLPack capsule of another kDLExtDev "
              "producer, or of a tpu tensor that has since been freed)");
  TORCH_CHECK(base_offset == 0, "this tpu tensor was imported through DLPack from a view that starts ", base_offset,
              " bytes into its storage; torch_tpu shares storages through DLPack only from their start. Export a "
              "tensor with storage_offset() == 0 (e.g. t.clone()) instead");
  // The import covers a prefix of the allocation: widen it to the whole allocation so programs see one storage size.
  if (storage.nbytes() != allocation_nbytes) storage.unsafeGetStorageImpl()->set_nbytes(allocation_nbytes);
  return *data;
}

}  // namespace torch_tpu
