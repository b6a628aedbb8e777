#include "runtime/error.h"

namespace torch_tpu {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kCancelled: return "CANCELLED";
    case ErrorCode::kUnknown: return "UNKNOWN";
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case ErrorCode::kNotFound: return "NOT_FOUND";
    case ErrorCode::kAlreadyExists: return "ALREADY_EXISTS";
    case ErrorCode::kPermissionDenied: return "PERMISSION_DENIED";
    case ErrorCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case ErrorCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case ErrorCode::kAborted: return "ABORTED";
    case ErrorCode::kOutOfRange: return "OUT_OF_RANGE";
    case ErrorCode::kUnimplemented: return "UNIMPLEMENTED";
    case ErrorCode::kInternal: return "INTERNAL";
    case ErrorCode::kUnavailable: return "UNAVAILABLE";
    case ErrorCode::kDataLoss: return "DATA_LOSS";
    case ErrorCode::kUnauthenticated: return "UNAUTHENTICATED";
  }
  return "UNKNOWN";
}

namespace {
std::string describe(ErrorCode code, const std::string& call, const std::string& message) {
  return call + " failed [" + error_code_name(code) + "]: " + message;
}
}  // namespace

Error::Error(ErrorCode code, std::string call, std::string message)
    : std::runtime_error(describe(code, call, message)),
      code_(code),
      call_(std::move(call)),
      message_(std::move(message)) {}

void fail(ErrorCode code, const std::string& call, const std::string& message) {
  throw Error(code, call, message);
}

}  // namespace torch_tpu
