// A PJRT client: the devices of one plugin in this process, host transfers and compilation.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "pjrt_c_api.h"
#include "runtime/buffer.h"
#include "runtime/plugin.h"

namespace torch_tpu {

class Executable;

using OptionValue = std::variant<std::string, int64_t, std::vector<int64_t>, float, bool>;
struct CreateOption {
  std::string name;
  OptionValue value;
};

struct DeviceInfo {
  int index = 0;              // position among addressable devices: the torch device index
  int id = 0;                 // PJRT global id
  int local_hardware_id = -1;
  std::string kind;           // e.g. "cpu", "NVIDIA H200", "TPU v6 lite"
  std::string description;    // DeviceDescription_ToString
  std::map<std::string, std::string> attributes;  // DeviceDescription_Attributes (e.g. core_count), as text
  PJRT_Device* raw = nullptr;
};

struct MemoryStats {
  bool available = false;  // false when the plugin does not report memory (XLA-CPU)
  int64_t bytes_in_use = 0;
  std::optional<int64_t> peak_bytes_in_use;
  std::optional<int64_t> bytes_limit;
  std::optional<int64_t> num_allocs;
  std::optional<int64_t> bytes_reserved;
};

// Mirrors PJRT_HostBufferSemantics.
enum class HostSemantics : int {
  kImmutableOnlyDuringCall = 0,
  kImmutableUntilTransferCompletes = 1,
  kImmutableZeroCopy = 2,
};

class Client {
 public:
  static std::shared_ptr<Client> create(std::shared_ptr<Plugin> plugin, const std::vector<CreateOption>& options);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  const Plugin& plugin() const { return *plugin_; }
  const PJRT_Api* api() const { return plugin_->api(); }
  const std::string& platform_name() const { return platform_name_; }
  const std::string& platform_version() const { return platform_version_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const DeviceInfo& device(int index) const;
  MemoryStats memory_stats(int index) const;

  // Copies host data to device `index`. `byte_strides` empty means dense row-major. With kImmutableOnlyDuringCall the
  // host data may be reused on return; otherwise keep it alive until `*done` (if given) fires.
  std::shared_ptr<Buffer> buffer_from_host(const void* data, ElementType type, const std::vector<int64_t>& dims,
                                           const std::vector<int64_t>& byte_strides, int index,
                                           HostSemantics semantics = HostSemantics::kImmutableOnlyDuringCall,
                                           Event* done = nullptr) const;

  // Compiles MLIR text with serialized xla.CompileOptionsProto bytes. Prefer CompileCache::get_or_compile.
  std::shared_ptr<Executable> compile(const std::string& mlir, const std::string& options) const;
  std::shared_ptr<Executable> deserialize(const std::string& bytes) const;

  PJRT_Client* raw() const { return client_; }

 private:
  Client() = default;

  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::string platform_name_;
  std::string platform_version_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace torch_tpu
