// The one place that talks the PJRT calling convention: argument structs with struct_size, table entries that
// may be missing in older plugins, and PJRT_Error* turned into torch_tpu::Error.
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

#include "pjrt_c_api.h"
#include "runtime/error.h"

namespace torch_tpu {

// Reads the message and code of `error`, destroys it and throws. No-op for nullptr.
void pjrt_check(const PJRT_Api* api, PJRT_Error* error, const char* call);

// Same, but returns the error instead of throwing (for callbacks and destructors). nullptr -> nullopt-like kOk.
Error pjrt_take_error(const PJRT_Api* api, PJRT_Error* error, const char* call);

// Fork safety. A PJRT client owns threads that a fork()ed child does not inherit, so the child must never call into
// the plugin: calls fail with FAILED_PRECONDITION ("Cannot re-initialize tpu in forked subprocess", PyTorch's
// wording for CUDA) and destructors leak instead of waiting on threads that do not exist. watch_for_fork() arms the
// check (Client::create calls it); in_forked_child() is true in any process forked after that.
void watch_for_fork();
bool in_forked_child() noexcept;
[[noreturn]] void fail_in_forked_child(const char* call);

// A PJRT_NamedValue as text (lists joined with '.').
std::string named_value_text(const PJRT_NamedValue& v);

// Fetches a table entry, failing with UNIMPLEMENTED when the plugin's table is too short or the slot is empty.
template <class Fn>
Fn pjrt_entry(const PJRT_Api* api, size_t offset, const char* call) {
  if (in_forked_child()) fail_in_forked_child(call);
  Fn fn = nullptr;
  if (api->struct_size >= offset + sizeof(Fn)) {
    std::memcpy(&fn, reinterpret_cast<const char*>(api) + offset, sizeof(Fn));
  }
  if (fn == nullptr) {
    fail(ErrorCode::kUnimplemented, call, "this PJRT plugin does not implement the entry");
  }
  return fn;
}

}  // namespace torch_tpu

// Declares `var` as a zeroed PJRT argument struct of type `type` with its struct_size set.
#define TPU_PJRT_ARGS(type, var) \
  type var;                      \
  std::memset(&var, 0, sizeof(var)); \
  var.struct_size = type##_STRUCT_SIZE

// Calls entry PJRT_<fn> of `api` with `args` and throws torch_tpu::Error on failure.
#define TPU_PJRT_CALL(api, fn, args)                                                                      \
  ::torch_tpu::pjrt_check((api),                                                                        \
                          ::torch_tpu::pjrt_entry<PJRT_##fn*>((api), offsetof(PJRT_Api, PJRT_##fn),     \
                                                             "PJRT_" #fn)(&(args)),                    \
                          "PJRT_" #fn)
