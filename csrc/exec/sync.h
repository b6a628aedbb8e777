// Work in flight per device. Debug mode awaits every execution at once; strict mode records the completion events
// here, and sync points (synchronize(), host reads, events) wait for them and surface their errors.
#pragma once

#include "runtime/event.h"

namespace torch_tpu {

void track_pending(int device, Event event);
// Waits for everything in flight on `device`; rethrows the first error (naming the op that caused it).
void synchronize_device(int device);
void synchronize_all();
bool device_idle(int device);

}  // namespace torch_tpu
