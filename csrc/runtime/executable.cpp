#include "runtime/executable.h"

#include <memory>

#include "runtime/counters.h"
#include "runtime/pjrt.h"
#include "runtime/trace.h"

namespace torch_tpu {
namespace {

// Borrowed view of the PJRT_Executable behind a loaded executable; destroyed on scope exit.
class ExecutableView {
 public:
  ExecutableView(const PJRT_Api* api, PJRT_LoadedExecutable* loaded) : api_(api) {
    TPU_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args, args);
    args.loaded_executable = loaded;
    TPU_PJRT_CALL(api_, LoadedExecutable_GetExecutable, args);
    executable_ = args.executable;
  }
  ~ExecutableView() {
    if (in_forked_child()) return;
    TPU_PJRT_ARGS(PJRT_Executable_Destroy_Args, args);
    args.executable = executable_;
    PJRT_Error* err = api_->PJRT_Executable_Destroy(&args);
    if (err != nullptr) pjrt_take_error(api_, err, "PJRT_Executable_Destroy");
  }
  ExecutableView(const ExecutableView&) = delete;
  ExecutableView& operator=(const ExecutableView&) = delete;
  PJRT_Executable* get() const { return executable_; }

 private:
  const PJRT_Api* api_;
  PJRT_Executable* executable_ = nullptr;
};

}  // namespace

Executable::Executable(const PJRT_Api* api, PJRT_LoadedExecutable* executable) : api_(api), executable_(executable) {
  runtime_counters().live_executables++;
  ExecutableView view(api_, executable_);
  TPU_PJRT_ARGS(PJRT_Executable_NumOutputs_Args, args);
  args.executable = view.get();
  TPU_PJRT_CALL(api_, Executable_NumOutputs, args);
  num_outputs_ = args.num_outputs;
}

Executable::~Executable() {
  runtime_counters().live_executables--;
  if (in_forked_child()) return;  // leaked: the plugin's threads are not in this process
  TPU_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args, args);
  args.executable = executable_;
  PJRT_Error* err = api_->PJRT_LoadedExecutable_Destroy(&args);
  if (err != nullptr) pjrt_take_error(api_, err, "PJRT_LoadedExecutable_Destroy");
}

namespace {
struct PendingTrace {
  ExecutionRecord record;
};

void on_traced_completion(PJRT_Error* error, void* user_arg) {
  std::unique_ptr<PendingTrace> pending(static_cast<PendingTrace*>(user_arg));
  pending->record.end_ns = trace::now_ns();
  if (error != nullptr) {
    // The execution's error reaches the op through its own event; only drop this copy.
    pending->record.label += " (failed)";
  }
  trace::record(std::move(pending->record));
  trace::finished();
}
}  // namespace

// Registers a second completion callback on the execution's event (the ExecuteResult keeps the event itself).
void Executable::trace_completion(PJRT_Event* done, PJRT_Device* device, int64_t start_ns) const {
  auto pending = std::make_unique<PendingTrace>();
  pending->record.label = label_;
  pending->record.start_ns = start_ns;
  pending->record.correlation = trace::current_correlation();
  TPU_PJRT_ARGS(PJRT_Device_GetDescription_Args, desc);
  desc.device = device;
  TPU_PJRT_ARGS(PJRT_DeviceDescription_Id_Args, id);
  if (api_->PJRT_Device_GetDescription(&desc) == nullptr) {
    id.device_description = desc.device_description;
    if (api_->PJRT_DeviceDescription_Id(&id) == nullptr) pending->record.device_id = id.id;
  }
  pending->record.thread = 0;
  TPU_PJRT_ARGS(PJRT_Event_OnReady_Args, args);
  args.event = done;
  args.callback = &on_traced_completion;
  args.user_arg = pending.get();
  trace::started();
  PJRT_Error* err = api_->PJRT_Event_OnReady(&args);
  if (err != nullptr) {
    pjrt_take_error(api_, err, "PJRT_Event_OnReady");
    trace::finished();
    return;
  }
  pending.release();  // owned by the callback now
}

ExecuteResult Executable::execute(const std::vector<Buffer*>& args, PJRT_Device* device,
                                  const std::vector<int64_t>& non_donatable) const {
  std::vector<PJRT_Buffer*> arg_list;
  arg_list.reserve(args.size());
  for (Buffer* b : args) {
    if (b == nullptr) fail(ErrorCode::kInvalidArgument, "PJRT_LoadedExecutable_Execute", "null argument buffer");
    arg_list.push_back(b->raw());
  }
  PJRT_Buffer* const* arg_lists[1] = {arg_list.data()};
  std::vector<PJRT_Buffer*> out_list(num_outputs_, nullptr);
  PJRT_Buffer** out_lists[1] = {out_list.data()};
  PJRT_Event* done_events[1] = {nullptr};

  TPU_PJRT_ARGS(PJRT_ExecuteOptions, options);
  options.non_donatable_input_indices = non_donatable.empty() ? nullptr : non_donatable.data();
  options.num_non_donatable_input_indices = non_donatable.size();

  const bool tracing = trace::enabled();
  const int64_t start_ns = tracing ? trace::now_ns() : 0;

  TPU_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args, exec);
  exec.executable = executable_;
  exec.options = &options;
  exec.argument_lists = arg_lists;
  exec.num_devices = 1;
  exec.num_args = arg_list.size();
  exec.output_lists = out_lists;
  exec.device_complete_events = done_events;
  exec.execute_device = device;
  TPU_PJRT_CALL(api_, LoadedExecutable_Execute, exec);
  runtime_counters().executions++;
  if (tracing && done_events[0] != nullptr) trace_completion(done_events[0], device, start_ns);

  ExecuteResult result;
  result.done = Event(api_, done_events[0], "PJRT_LoadedExecutable_Execute");
  result.outputs.reserve(num_outputs_);
  for (PJRT_Buffer* b : out_list) result.outputs.push_back(std::make_shared<Buffer>(api_, b));
  return result;
}

std::string Executable::serialize() const {
  ExecutableView view(api_, executable_);
  TPU_PJRT_ARGS(PJRT_Executable_Serialize_Args, args);
  args.executable = view.get();
  TPU_PJRT_CALL(api_, Executable_Serialize, args);
  std::string bytes(args.serialized_bytes, args.serialized_bytes_size);
  if (args.serialized_executable_deleter != nullptr) args.serialized_executable_deleter(args.serialized_executable);
  return bytes;
}

}  // namespace torch_tpu
