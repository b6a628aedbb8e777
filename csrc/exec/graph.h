// The eager engine's one entry point for building programs. Debug and strict mode give every op a program of its
// own, run at once; fused mode (DeferAndFuse) appends ops to the device's open graph, which runs when a host read,
// synchronize(), a program of its own or the node limit needs its results. Only storages alive when the graph runs
// become outputs, so dead intermediates never occupy device memory.
#pragma once

#include <functional>

#include "exec/tensor_program.h"

namespace torch_tpu {

// Builds one op's worth of program on the program ops of `device` go to now, then runs it or leaves it open.
// `build` must not wait for device values (no reads of storages, no .item()): checks go through add_check.
void with_program(int device, const std::function<void(TensorProgram&)>& build);

// Runs the open graph of every device (before a mode switch, at exit of a fused region).
void flush_all_devices();
// Ops recorded into the open graph before it runs on its own.
void set_graph_node_limit(int64_t nodes);
int64_t graph_node_limit();

}  // namespace torch_tpu
