// A device buffer owned by a PJRT plugin. Move-only in spirit: shared by std::shared_ptr, destroyed once.
#pragma once

#include <cstdint>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/element_type.h"
#include "runtime/event.h"

namespace torch_tpu {

class Buffer {
 public:
  Buffer(const PJRT_Api* api, PJRT_Buffer* buffer);
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  ElementType element_type() const { return element_type_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t element_count() const;
  int64_t byte_size() const { return element_count() * element_size(element_type_); }
  int64_t on_device_size() const;

  // Starts a dense row-major copy into `dst` (`size` bytes); the returned event fires when it is done.
  Event to_host_async(void* dst, size_t size) const;
  void to_host(void* dst, size_t size) const { to_host_async(dst, size).await(); }

  // An event that fires when the buffer's contents are computed (and carries the producer's error, if any).
  Event ready_event() const;
  void await_ready() const { ready_event().await(); }

  // Frees the device memory now; the handle stays valid and reports is_deleted().
  void release_device_memory();
  bool is_deleted() const;

  PJRT_Buffer* raw() const { return buffer_; }

 private:
  const PJRT_Api* api_;
  PJRT_Buffer* buffer_;
  ElementType element_type_ = ElementType::kInvalid;
  std::vector<int64_t> dims_;
};

}  // namespace torch_tpu
