#include "runtime/client.h"

#include "runtime/counters.h"
#include "runtime/executable.h"
#include "runtime/pjrt.h"

namespace torch_tpu {
namespace {

PJRT_NamedValue to_named_value(const CreateOption& option) {
  PJRT_NamedValue v;
  std::memset(&v, 0, sizeof(v));
  v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  v.name = option.name.c_str();
  v.name_size = option.name.size();
  v.value_size = 1;
  if (auto* s = std::get_if<std::string>(&option.value)) {
    v.type = PJRT_NamedValue_kString;
    v.string_value = s->c_str();
    v.value_size = s->size();
  } else if (auto* i = std::get_if<int64_t>(&option.value)) {
    v.type = PJRT_NamedValue_kInt64;
    v.int64_value = *i;
  } else if (auto* l = std::get_if<std::vector<int64_t>>(&option.value)) {
    v.type = PJRT_NamedValue_kInt64List;
    v.int64_array_value = l->data();
    v.value_size = l->size();
  } else if (auto* f = std::get_if<float>(&option.value)) {
    v.type = PJRT_NamedValue_kFloat;
    v.float_value = *f;
  } else {
    v.type = PJRT_NamedValue_kBool;
    v.bool_value = std::get<bool>(option.value);
  }
  return v;
}

DeviceInfo describe_device(const PJRT_Api* api, PJRT_Device* device, int index) {
  DeviceInfo info;
  info.index = index;
  info.raw = device;
  TPU_PJRT_ARGS(PJRT_Device_GetDescription_Args, desc);
  desc.device = device;
  TPU_PJRT_CALL(api, Device_GetDescription, desc);

  TPU_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
  id.device_description = desc.device_description;
  TPU_PJRT_CALL(api, DeviceDescription_Id, id);
  info.id = id.id;

  TPU_PJRT_ARGS(PJRT_DeviceDescription_Kind_Args, kind);
  kind.device_description = desc.device_description;
  TPU_PJRT_CALL(api, DeviceDescription_Kind, kind);
  info.kind.assign(kind.device_kind, kind.device_kind_size);

  TPU_PJRT_ARGS(PJRT_DeviceDescription_ToString_Args, str);
  str.device_description = desc.device_description;
  TPU_PJRT_CALL(api, DeviceDescription_ToString, str);
  info.description.assign(str.to_string, str.to_string_size);

  TPU_PJRT_ARGS(PJRT_Device_LocalHardwareId_Args, hw);
  hw.device = device;
  TPU_PJRT_CALL(api, Device_LocalHardwareId, hw);
  info.local_hardware_id = hw.local_hardware_id;

  try {  // informative only: older plugins lack the entry
    TPU_PJRT_ARGS(PJRT_DeviceDescription_Attributes_Args, attrs);
    attrs.device_description = desc.device_description;
    TPU_PJRT_CALL(api, DeviceDescription_Attributes, attrs);
    for (size_t i = 0; i < attrs.num_attributes; ++i) {
      const PJRT_NamedValue& v = attrs.attributes[i];
      info.attributes[std::string(v.name, v.name_size)] = named_value_text(v);
    }
  } catch (const Error&) {
  }
  return info;
}

}  // namespace

std::shared_ptr<Client> Client::create(std::shared_ptr<Plugin> plugin, const std::vector<CreateOption>& options) {
  const PJRT_Api* api = plugin->api();
  std::vector<PJRT_NamedValue> values;
  values.reserve(options.size());
  for (const auto& o : options) values.push_back(to_named_value(o));

  TPU_PJRT_ARGS(PJRT_Client_Create_Args, args);
  args.create_options = values.data();
  args.num_options = values.size();
  TPU_PJRT_CALL(api, Client_Create, args);
  watch_for_fork();

  std::shared_ptr<Client> client(new Client());
  client->plugin_ = std::move(plugin);
  client->client_ = args.client;

  TPU_PJRT_ARGS(PJRT_Client_PlatformName_Args, name);
  name.client = client->client_;
  TPU_PJRT_CALL(api, Client_PlatformName, name);
  client->platform_name_.assign(name.platform_name, name.platform_name_size);

  TPU_PJRT_ARGS(PJRT_Client_PlatformVersion_Args, version);
  version.client = client->client_;
  TPU_PJRT_CALL(api, Client_PlatformVersion, version);
  client->platform_version_.assign(version.platform_version, version.platform_version_size);

  TPU_PJRT_ARGS(PJRT_Client_AddressableDevices_Args, devs);
  devs.client = client->client_;
  TPU_PJRT_CALL(api, Client_AddressableDevices, devs);
  for (size_t i = 0; i < devs.num_addressable_devices; ++i) {
    client->devices_.push_back(describe_device(api, devs.addressable_devices[i], static_cast<int>(i)));
  }
  return client;
}

Client::~Client() {
  if (client_ == nullptr || in_forked_child()) return;  // a forked child leaks the parent's client
  TPU_PJRT_ARGS(PJRT_Client_Destroy_Args, args);
  args.client = client_;
  PJRT_Error* err = api()->PJRT_Client_Destroy(&args);
  if (err != nullptr) pjrt_take_error(api(), err, "PJRT_Client_Destroy");
}

const DeviceInfo& Client::device(int index) const {
  if (index < 0 || index >= static_cast<int>(devices_.size())) {
    fail(ErrorCode::kInvalidArgument, "device",
         "device index " + std::to_string(index) + " is out of range: " + std::to_string(devices_.size()) +
             " device(s) available");
  }
  return devices_[index];
}

MemoryStats Client::memory_stats(int index) const {
  MemoryStats stats;
  TPU_PJRT_ARGS(PJRT_Device_MemoryStats_Args, args);
  args.device = device(index).raw;
  PJRT_Error* err = api()->PJRT_Device_MemoryStats(&args);
  if (err != nullptr) {
    pjrt_take_error(api(), err, "PJRT_Device_MemoryStats");  // UNIMPLEMENTED on XLA-CPU
    return stats;
  }
  stats.available = true;
  stats.bytes_in_use = args.bytes_in_use;
  if (args.peak_bytes_in_use_is_set) stats.peak_bytes_in_use = args.peak_bytes_in_use;
  if (args.bytes_limit_is_set) stats.bytes_limit = args.bytes_limit;
  if (args.num_allocs_is_set) stats.num_allocs = args.num_allocs;
  if (args.bytes_reserved_is_set) stats.bytes_reserved = args.bytes_reserved;
  return stats;
}

std::shared_ptr<Buffer> Client::buffer_from_host(const void* data, ElementType type, const std::vector<int64_t>& dims,
                                                 const std::vector<int64_t>& byte_strides, int index,
                                                 HostSemantics semantics, Event* done) const {
  if (!byte_strides.empty() && byte_strides.size() != dims.size()) {
    fail(ErrorCode::kInvalidArgument, "PJRT_Client_BufferFromHostBuffer",
         "got " + std::to_string(byte_strides.size()) + " byte strides for " + std::to_string(dims.size()) + " dims");
  }
  element_size(type);  // rejects kInvalid, which aborts some plugins
  TPU_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args, args);
  args.client = client_;
  args.data = data;
  args.type = static_cast<PJRT_Buffer_Type>(type);
  args.dims = dims.data();
  args.num_dims = dims.size();
  args.byte_strides = byte_strides.empty() ? nullptr : byte_strides.data();
  args.num_byte_strides = byte_strides.size();
  args.host_buffer_semantics = static_cast<PJRT_HostBufferSemantics>(semantics);
  args.device = device(index).raw;
  TPU_PJRT_CALL(api(), Client_BufferFromHostBuffer, args);
  Event transfer(api(), args.done_with_host_buffer, "PJRT_Client_BufferFromHostBuffer");
  auto buffer = std::make_shared<Buffer>(api(), args.buffer);
  runtime_counters().host_to_device++;
  runtime_counters().host_to_device_bytes += buffer->byte_size();
  if (done != nullptr) {
    *done = std::move(transfer);
  } else if (semantics != HostSemantics::kImmutableOnlyDuringCall) {
    transfer.await();
  }
  return buffer;
}

std::shared_ptr<Executable> Client::compile(const std::string& mlir, const std::string& options) const {
  TPU_PJRT_ARGS(PJRT_Program, program);
  static const char kFormat[] = "mlir";
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;

  TPU_PJRT_ARGS(PJRT_Client_Compile_Args, args);
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  TPU_PJRT_CALL(api(), Client_Compile, args);
  return std::make_shared<Executable>(api(), args.executable);
}

std::shared_ptr<Executable> Client::deserialize(const std::string& bytes) const {
  TPU_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args, args);
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  TPU_PJRT_CALL(api(), Executable_DeserializeAndLoad, args);
  return std::make_shared<Executable>(api(), args.loaded_executable);
}

}  // namespace torch_tpu
