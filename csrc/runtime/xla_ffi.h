// The part of XLA's typed FFI C ABI (xla/ffi/api/c_api.h, API 0.1) that torch_tpu's host kernels use, declared
// here because the plugin wheels ship only pjrt_c_api.h. Layouts are the ABI's; only the fields read are named.
#pragma once

#include <cstddef>
#include <cstdint>

namespace torch_tpu::xla_ffi {

enum class ExtensionType : int { kMetadata = 1 };
enum class Stage : int { kInstantiate = 0, kPrepare = 1, kInitialize = 2, kExecute = 3 };
enum class DataType : int { kS64 = 5, kF32 = 11, kF64 = 12 };
enum class AttrType : int { kArray = 1, kDictionary = 2, kScalar = 3, kString = 4 };
enum class ErrorCode : int { kInvalidArgument = 3, kInternal = 13 };

struct ExtensionBase {
  size_t struct_size;
  ExtensionType type;
  ExtensionBase* next;
};

struct Error;  // opaque, owned by XLA once a handler returns it

struct ApiVersion {
  size_t struct_size;
  ExtensionBase* extension_start;
  int major_version;
  int minor_version;
};

struct ErrorCreateArgs {
  size_t struct_size;
  ExtensionBase* extension_start;
  const char* message;
  ErrorCode errc;
};

// The head of XLA_FFI_Api: enough to reach XLA_FFI_Error_Create.
struct Api {
  size_t struct_size;
  ExtensionBase* extension_start;
  ApiVersion api_version;
  void* internal_api;
  Error* (*error_create)(ErrorCreateArgs* args);
};

struct Buffer {
  size_t struct_size;
  ExtensionBase* extension_start;
  DataType dtype;
  void* data;
  int64_t rank;
  int64_t* dims;
};

struct List {  // XLA_FFI_Args and XLA_FFI_Rets share this layout (types are all "buffer" here)
  size_t struct_size;
  ExtensionBase* extension_start;
  int64_t size;
  int* types;
  void** items;
};

struct ByteSpan {
  const char* ptr;
  size_t len;
};

struct Array {
  DataType dtype;
  size_t size;
  void* data;
};

struct Attrs {  // sorted by name
  size_t struct_size;
  ExtensionBase* extension_start;
  int64_t size;
  AttrType* types;
  ByteSpan** names;
  void** attrs;  // kArray: Array*
};

struct CallFrame {
  size_t struct_size;
  ExtensionBase* extension_start;
  const Api* api;
  void* ctx;
  Stage stage;
  List args;
  List rets;
  Attrs attrs;
};

// Asked of a handler (through CallFrame::extension_start) when XLA registers it: the API version it speaks.
struct Metadata {
  size_t struct_size;
  ApiVersion api_version;
  uint32_t traits;
};
struct MetadataExtension {
  ExtensionBase base;
  Metadata* metadata;
};

using Handler = Error*(CallFrame* frame);

// The first thing a handler does: when `frame` is XLA's metadata query, answer it (API 0.1, no traits) and return
// true; the handler then returns nullptr at once.
inline bool answer_metadata_query(CallFrame* frame) {
  if (frame->extension_start == nullptr || frame->extension_start->type != ExtensionType::kMetadata) return false;
  Metadata* m = reinterpret_cast<MetadataExtension*>(frame->extension_start)->metadata;
  m->api_version.major_version = 0;
  m->api_version.minor_version = 1;
  m->traits = 0;
  return true;
}

}  // namespace torch_tpu::xla_ffi
