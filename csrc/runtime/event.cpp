#include "runtime/event.h"

#include <memory>

#include "runtime/pjrt.h"

namespace torch_tpu {

Event::Event(Event&& other) noexcept : api_(other.api_), event_(other.event_), origin_(other.origin_) {
  other.event_ = nullptr;
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    reset();
    api_ = other.api_;
    event_ = other.event_;
    origin_ = other.origin_;
    other.event_ = nullptr;
  }
  return *this;
}

Event::~Event() { reset(); }

void Event::reset() noexcept {
  if (event_ == nullptr) return;
  if (in_forked_child()) {  // leaked: the plugin's threads are not in this process
    event_ = nullptr;
    return;
  }
  TPU_PJRT_ARGS(PJRT_Event_Destroy_Args, args);
  args.event = event_;
  PJRT_Error* err = api_->PJRT_Event_Destroy(&args);
  if (err != nullptr) pjrt_take_error(api_, err, "PJRT_Event_Destroy");  // swallowed: destructors never throw
  event_ = nullptr;
}

bool Event::is_ready() const {
  if (event_ == nullptr) return true;
  TPU_PJRT_ARGS(PJRT_Event_IsReady_Args, args);
  args.event = event_;
  TPU_PJRT_CALL(api_, Event_IsReady, args);
  return args.is_ready;
}

void Event::await() const {
  if (event_ == nullptr) return;
  if (in_forked_child()) fail_in_forked_child(origin_);
  TPU_PJRT_ARGS(PJRT_Event_Await_Args, args);
  args.event = event_;
  PJRT_Error* err = api_->PJRT_Event_Await(&args);
  if (err != nullptr) {
    Error e = pjrt_take_error(api_, err, origin_);
    throw e;
  }
}

namespace {
struct OnReadyState {
  const PJRT_Api* api;
  const char* origin;
  std::function<void(const Error&)> callback;
};

void on_ready_trampoline(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<OnReadyState> state(static_cast<OnReadyState*>(user_arg));
  Error status = pjrt_take_error(state->api, error, state->origin);
  try {
    state->callback(status);
  } catch (...) {
    // A callback runs on a PJRT thread: nowhere to propagate to.
  }
}
}  // namespace

void Event::on_ready(std::function<void(const Error&)> callback) && {
  if (event_ == nullptr) {
    callback(Error(ErrorCode::kOk, origin_, ""));
    return;
  }
  auto state = std::make_unique<OnReadyState>(OnReadyState{api_, origin_, std::move(callback)});
  TPU_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = event_;
  args.callback = &on_ready_trampoline;
  args.user_arg = state.get();
  TPU_PJRT_CALL(api_, Event_OnReady, args);
  state.release();  // owned by the trampoline now
  // PJRT keeps the event alive for the callback; our handle may go.
  reset();
}

}  // namespace torch_tpu
