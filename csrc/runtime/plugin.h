// A loaded PJRT plugin: the shared library, its function table and what it says about itself.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pjrt_c_api.h"

namespace torch_tpu {

class Plugin {
 public:
  // Loads (once per path and process) and initialises the plugin at `path`. Throws Error: NOT_FOUND for a missing
  // file, INVALID_ARGUMENT for a file that is not a PJRT plugin, FAILED_PRECONDITION for an incompatible version.
  static std::shared_ptr<Plugin> load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int major_version() const { return major_; }
  int minor_version() const { return minor_; }
  // Plugin_Attributes rendered as strings (e.g. "xla_version").
  const std::map<std::string, std::string>& attributes() const { return attributes_; }
  // Identifies the exact plugin build: keys compiled-executable caches.
  const std::string& identity() const { return identity_; }
  // Registers a typed XLA FFI handler (an xla_ffi::Handler) as the custom-call target `target` on `platform`
  // through the plugin's FFI extension. False when the plugin has no such extension; throws Error if it refuses.
  bool register_ffi_handler(const std::string& target, const std::string& platform, void* handler) const;

 private:
  Plugin() = default;

  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0;
  int minor_ = 0;
  std::map<std::string, std::string> attributes_;
  std::string identity_;
};

}  // namespace torch_tpu
