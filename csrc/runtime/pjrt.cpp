#include "runtime/pjrt.h"

namespace torch_tpu {

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
