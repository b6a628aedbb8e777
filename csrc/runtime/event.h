// A PJRT event: completion of a transfer or an execution. Move-only; destroying it never throws.
#pragma once

#include <functional>

#include "pjrt_c_api.h"
#include "runtime/error.h"

namespace torch_tpu {

class Event {
 public:
  Event() = default;
  Event(const PJRT_Api* api, PJRT_Event* event, const char* origin) : api_(api), event_(event), origin_(origin) {}
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  bool valid() const { return event_ != nullptr; }
  bool is_ready() const;
  // Blocks until the event fires; throws the event's error, if any. A null event is already complete.
  void await() const;
  // Calls `callback` once the event fires, with kOk or the error. Consumes the event.
  void on_ready(std::function<void(const Error&)> callback) &&;

 private:
  void reset() noexcept;

  const PJRT_Api* api_ = nullptr;
  PJRT_Event* event_ = nullptr;
  const char* origin_ = "";
};

}  // namespace torch_tpu
