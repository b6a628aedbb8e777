#include "runtime/pjrt.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

namespace torch_tpu {
namespace {
std::atomic<bool> g_forked_child{false};
void mark_forked_child() { g_forked_child.store(true, std::memory_order_relaxed); }
}  // namespace

void watch_for_fork() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, &mark_forked_child); });
}

bool in_forked_child() noexcept { return g_forked_child.load(std::memory_order_relaxed); }

void fail_in_forked_child(const char* call) {
  fail(ErrorCode::kFailedPrecondition, call,
       "Cannot re-initialize tpu in forked subprocess. To use tpu with multiprocessing, you must use the 'spawn' "
       "start method");
}

Error pjrt_take_error(const PJRT_Api* api, PJRT_Error* error, const char* call) {
  if (error == nullptr) return Error(ErrorCode::kOk, call, "");
  TPU_PJRT_ARGS(PJRT_Error_Message_Args, msg);
  msg.error = error;
  api->PJRT_Error_Message(&msg);
  std::string message(msg.message, msg.message_size);

  TPU_PJRT_ARGS(PJRT_Error_GetCode_Args, code_args);
  code_args.error = error;
  ErrorCode code = ErrorCode::kUnknown;
  if (api->PJRT_Error_GetCode(&code_args) == nullptr) code = static_cast<ErrorCode>(code_args.code);

  TPU_PJRT_ARGS(PJRT_Error_Destroy_Args, destroy);
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  return Error(code, call, message);
}

void pjrt_check(const PJRT_Api* api, PJRT_Error* error, const char* call) {
  if (error == nullptr) return;
  throw pjrt_take_error(api, error, call);
}

}  // namespace torch_tpu
