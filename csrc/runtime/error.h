// The one error type of torch_tpu. Every failure (a PJRT call, a bad argument, a missing plugin) becomes an
// Error carrying an absl-style status code, the call that failed and a human-readable message.
#pragma once

#include <stdexcept>
#include <string>

namespace torch_tpu {

// Values follow absl::StatusCode, which is also what PJRT_Error_GetCode reports.
enum class ErrorCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string call, std::string message);

  ErrorCode code() const noexcept { return code_; }
  const std::string& call() const noexcept { return call_; }
  const std::string& message() const noexcept { return message_; }

 private:
  ErrorCode code_;
  std::string call_;
  std::string message_;
};

[[noreturn]] void fail(ErrorCode code, const std::string& call, const std::string& message);

}  // namespace torch_tpu
