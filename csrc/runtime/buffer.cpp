#include "runtime/buffer.h"

#include "runtime/counters.h"
#include "runtime/pjrt.h"

namespace torch_tpu {

Buffer::Buffer(const PJRT_Api* api, PJRT_Buffer* buffer) : api_(api), buffer_(buffer) {
  runtime_counters().live_buffers++;
  runtime_counters().buffers_created++;
  TPU_PJRT_ARGS(PJRT_Buffer_ElementType_Args, type_args);
  type_args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_ElementType, type_args);
  element_type_ = static_cast<ElementType>(type_args.type);

  TPU_PJRT_ARGS(PJRT_Buffer_Dimensions_Args, dim_args);
  dim_args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_Dimensions, dim_args);
  dims_.assign(dim_args.dims, dim_args.dims + dim_args.num_dims);
}

Buffer::~Buffer() {
  runtime_counters().live_buffers--;
  if (in_forked_child()) return;  // leaked: the plugin's threads are not in this process
  TPU_PJRT_ARGS(PJRT_Buffer_Destroy_Args, args);
  args.buffer = buffer_;
  PJRT_Error* err = api_->PJRT_Buffer_Destroy(&args);
  if (err != nullptr) pjrt_take_error(api_, err, "PJRT_Buffer_Destroy");
}

int64_t Buffer::element_count() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

int64_t Buffer::on_device_size() const {
  TPU_PJRT_ARGS(PJRT_Buffer_OnDeviceSizeInBytes_Args, args);
  args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_OnDeviceSizeInBytes, args);
  return static_cast<int64_t>(args.on_device_size_in_bytes);
}

Event Buffer::to_host_async(void* dst, size_t size) const {
  if (static_cast<int64_t>(size) < byte_size()) {
    fail(ErrorCode::kInvalidArgument, "PJRT_Buffer_ToHostBuffer",
         "destination holds " + std::to_string(size) + " bytes but the buffer has " + std::to_string(byte_size()));
  }
  runtime_counters().device_to_host++;
  runtime_counters().device_to_host_bytes += byte_size();
  if (byte_size() == 0) return Event();
  TPU_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args, args);
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = size;
  TPU_PJRT_CALL(api_, Buffer_ToHostBuffer, args);
  return Event(api_, args.event, "PJRT_Buffer_ToHostBuffer");
}

Event Buffer::ready_event() const {
  TPU_PJRT_ARGS(PJRT_Buffer_ReadyEvent_Args, args);
  args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_ReadyEvent, args);
  return Event(api_, args.event, "device computation");
}

void Buffer::release_device_memory() {
  TPU_PJRT_ARGS(PJRT_Buffer_Delete_Args, args);
  args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_Delete, args);
}

bool Buffer::is_deleted() const {
  TPU_PJRT_ARGS(PJRT_Buffer_IsDeleted_Args, args);
  args.buffer = buffer_;
  TPU_PJRT_CALL(api_, Buffer_IsDeleted, args);
  return args.is_deleted;
}

}  // namespace torch_tpu
