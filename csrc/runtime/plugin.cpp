#include "runtime/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <fstream>
#include <mutex>

#include "runtime/disk_cache.h"
#include "runtime/pjrt.h"

namespace torch_tpu {

std::string named_value_text(const PJRT_NamedValue& v) {
  switch (v.type) {
    case PJRT_NamedValue_kString: return std::string(v.string_value, v.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(v.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string s;
      for (size_t i = 0; i < v.value_size; ++i) s += (i ? "." : "") + std::to_string(v.int64_array_value[i]);
      return s;
    }
    case PJRT_NamedValue_kFloat: return std::to_string(v.float_value);
    case PJRT_NamedValue_kBool: return v.bool_value ? "true" : "false";
  }
  return "";
}

namespace {

// What the library is, not where it lies: its name, size and three 1 MiB windows of its bytes (start, middle, end).
// The compile cache keys executables by it, so the same plugin wheel installed in another virtual environment (a
// fresh clone's, CI's) finds the executables compiled before instead of recompiling everything; a rebuilt or upgraded
// plugin differs in size or bytes.
std::string content_identity(const std::string& path, uint64_t size) {
  constexpr uint64_t kWindow = 1 << 20;
  std::ifstream in(path, std::ios::binary);
  std::string bytes;
  for (uint64_t at : {uint64_t{0}, size / 2, size > kWindow ? size - kWindow : 0}) {
    std::string window(static_cast<size_t>(std::min(kWindow, size - std::min(at, size))), '\0');
    in.seekg(static_cast<std::streamoff>(at));
    in.read(window.data(), static_cast<std::streamsize>(window.size()));
    window.resize(static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
    in.clear();
    bytes += window;
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(stable_hash(bytes)));
  size_t slash = path.find_last_of('/');
  return (slash == std::string::npos ? path : path.substr(slash + 1)) + "|" + std::to_string(size) + "|" + hex;
}

}  // namespace

std::shared_ptr<Plugin> Plugin::load(const std::string& path) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<Plugin>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(path);
  if (it != loaded.end()) return it->second;

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    fail(ErrorCode::kNotFound, "load_plugin", "no PJRT plugin file at '" + path + "'");
  }
  // The library is never unloaded: plugins keep threads and static state alive for the whole process.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    fail(ErrorCode::kInvalidArgument, "load_plugin",
         "'" + path + "' could not be loaded as a shared library: " + (why ? why : "unknown dlopen error"));
  }
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr) {
    fail(ErrorCode::kInvalidArgument, "load_plugin", "'" + path + "' is not a PJRT plugin: it exports no GetPjrtApi");
  }
  const PJRT_Api* api = get_api();
  if (api == nullptr) fail(ErrorCode::kInternal, "load_plugin", "GetPjrtApi of '" + path + "' returned null");

  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->api_ = api;
  plugin->path_ = path;
  plugin->major_ = api->pjrt_api_version.major_version;
  plugin->minor_ = api->pjrt_api_version.minor_version;
  if (plugin->major_ != PJRT_API_MAJOR) {
    fail(ErrorCode::kFailedPrecondition, "load_plugin",
         "'" + path + "' implements PJRT API " + std::to_string(plugin->major_) + "." + std::to_string(plugin->minor_) +
             " but torch_tpu was built for major version " + std::to_string(PJRT_API_MAJOR));
  }

  TPU_PJRT_ARGS(PJRT_Plugin_Initialize_Args, init);
  TPU_PJRT_CALL(api, Plugin_Initialize, init);

  try {
    TPU_PJRT_ARGS(PJRT_Plugin_Attributes_Args, attrs);
    TPU_PJRT_CALL(api, Plugin_Attributes, attrs);
    for (size_t i = 0; i < attrs.num_attributes; ++i) {
      const PJRT_NamedValue& v = attrs.attributes[i];
      plugin->attributes_[std::string(v.name, v.name_size)] = named_value_text(v);
    }
  } catch (const Error&) {
    // Attributes are informative only; old plugins lack the entry.
  }
  plugin->identity_ = content_identity(path, static_cast<uint64_t>(st.st_size)) + "|" +
                      std::to_string(plugin->major_) + "." + std::to_string(plugin->minor_);
  loaded[path] = plugin;
  return plugin;
}

namespace {

// The PJRT FFI extension (pjrt_c_api_ffi_extension.h, version 2), which the wheels do not ship. Later headers put an
// `int api_version` after target_name_size; this is the layout up to PJRT 0.90 (the XLA-CPU wheel is 0.81).
constexpr int kFfiLayoutMaxMinor = 90;
struct FfiRegisterArgs {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;  // a typed XLA FFI handler
  const char* platform_name;
  size_t platform_name_size;
  int traits;
};
struct FfiExtension {
  PJRT_Extension_Base base;
  void* type_id_register;
  void* user_data_add;
  PJRT_Error* (*register_handler)(FfiRegisterArgs* args);
};

}  // namespace

bool Plugin::register_ffi_handler(const std::string& target, const std::string& platform, void* handler) const {
  if (major_ != 0 || minor_ > kFfiLayoutMaxMinor) return false;  // a layout this build does not know
  const PJRT_Extension_Base* ext = api_->extension_start;
  while (ext != nullptr && ext->type != PJRT_Extension_Type_FFI) ext = ext->next;
  if (ext == nullptr || ext->struct_size < offsetof(FfiExtension, register_handler) + sizeof(void*)) return false;
  const auto* ffi = reinterpret_cast<const FfiExtension*>(ext);
  if (ffi->register_handler == nullptr) return false;
  FfiRegisterArgs args{offsetof(FfiRegisterArgs, traits) + sizeof(int), target.data(), target.size(), handler,
                       platform.data(), platform.size(), 0};
  pjrt_check(api_, ffi->register_handler(&args), "PJRT_FFI_Register_Handler");
  return true;
}

}  // namespace torch_tpu
