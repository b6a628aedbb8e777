// Tests of runtime/ and hlo/ without torch: load the plugin given as argv[1], move data, compile and run programs.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hlo/builder.h"
#include "runtime/client.h"
#include "runtime/compile_cache.h"
#include "runtime/counters.h"
#include "runtime/error.h"
#include "runtime/host_heap.h"
#include "runtime/xla_ffi.h"

using namespace torch_tpu;

namespace {
int g_failures = 0;
int g_passed = 0;

void expect(bool ok, const std::string& what) {
  if (ok) {
    ++g_passed;
  } else {
    ++g_failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

void test_round_trip(const Client& client) {
  std::vector<float> host = {1.5f, -2.0f, 3.25f, 4.0f, 5.0f, 6.0f};
  auto buffer = client.buffer_from_host(host.data(), ElementType::kF32, {2, 3}, {}, 0);
  expect(buffer->dims() == std::vector<int64_t>({2, 3}), "round trip dims");
  std::vector<float> back(6);
  buffer->to_host(back.data(), back.size() * sizeof(float));
  expect(back == host, "round trip values");
}

void test_add_program(const Client& client, CompileCache& cache) {
  HloBuilder b;
  TensorType t{ElementType::kF32, {4}};
  Value x = b.arg(t);
  Value y = b.arg(t);
  Value two = b.constant(2.0, ElementType::kF32, {4});
  Value offsets = b.constant_values({0.5, -1.0, 0.0, 3.0}, ElementType::kF32);
  Value sum = b.binary("stablehlo.add", b.binary("stablehlo.add", b.binary("stablehlo.multiply", x, two), y), offsets);
  Value total = b.reduce(sum, b.constant(0.0, ElementType::kF32), {0}, "stablehlo.add");
  std::string text = b.build({sum, total});

  std::vector<float> a = {1, 2, 3, 4}, c = {10, 20, 30, 40};
  auto ba = client.buffer_from_host(a.data(), ElementType::kF32, {4}, {}, 0);
  auto bc = client.buffer_from_host(c.data(), ElementType::kF32, {4}, {}, 0);
  int64_t misses = runtime_counters().cache_misses;
  auto exe = cache.get_or_compile(text);
  auto exe_again = cache.get_or_compile(text);
  expect(exe == exe_again && runtime_counters().cache_misses == misses + 1, "compile cache hit on the same text");
  ExecuteResult r = exe->execute({ba.get(), bc.get()}, client.device(0).raw);
  r.done.await();
  std::vector<float> out(4);
  float sum_out = 0;
  r.outputs[0]->to_host(out.data(), sizeof(float) * 4);
  r.outputs[1]->to_host(&sum_out, sizeof(float));
  expect(out == std::vector<float>({12.5f, 23, 36, 51}), "elementwise program values (splat and dense constants)");
  expect(sum_out == 122.5f, "reduce program value");
}

// A function defined in other MLIR text (as a JAX export gives it, pretty-printed), called twice: it is added to
// the module once and both calls compute with it.
void test_called_function(const Client& client, CompileCache& cache) {
  const std::string functions =
      "  func.func private @lib_main(%arg0: tensor<3xf32>, %arg1: tensor<3xf32>) -> (tensor<3xf32> "
      "{jax.result_info = \"result\"}) {\n"
      "    %0 = stablehlo.multiply %arg0, %arg1 : tensor<3xf32>\n"
      "    %1 = call @lib_helper(%0) : (tensor<3xf32>) -> tensor<3xf32>\n"
      "    return %1 : tensor<3xf32>\n  }\n"
      "  func.func private @lib_helper(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = stablehlo.negate %arg0 : tensor<3xf32>\n    return %0 : tensor<3xf32>\n  }";
  HloBuilder b;
  TensorType t{ElementType::kF32, {3}};
  Value x = b.arg(t);
  Value once = b.call("lib_main", functions, {x, x}, {t})[0];
  Value twice = b.call("lib_main", functions, {once, x}, {t})[0];
  std::string text = b.build({twice});
  size_t first = text.find("@lib_helper(%arg0");
  expect(first != std::string::npos && text.find("@lib_helper(%arg0", first + 1) == std::string::npos,
         "a called function's text is added once");
  std::vector<float> in = {1, 2, -3};
  auto buffer = client.buffer_from_host(in.data(), ElementType::kF32, {3}, {}, 0);
  ExecuteResult r = cache.get_or_compile(text)->execute({buffer.get()}, client.device(0).raw);
  r.done.await();
  std::vector<float> out(3);
  r.outputs[0]->to_host(out.data(), sizeof(float) * 3);
  expect(out == std::vector<float>({1, 8, -27}), "func.call results: -(-(x*x)*x) = x^3");
}

void test_malformed_program(CompileCache& cache) {
  try {
    cache.get_or_compile("module { this is not mlir }");
    expect(false, "malformed program must throw");
  } catch (const Error& e) {
    expect(e.call() == "PJRT_Client_Compile" && !e.message().empty(), "malformed program error names the call");
  }
}

void test_missing_plugin() {
  try {
    Plugin::load("/nonexistent/plugin.so");
    expect(false, "missing plugin must throw");
  } catch (const Error& e) {
    expect(e.code() == ErrorCode::kNotFound, "missing plugin is NOT_FOUND");
  }
}

void test_builder_text() {
  HloBuilder b;
  Value x = b.arg({ElementType::kF32, {2, 3}}, 0);
  Value y = b.transpose(x, {1, 0});
  std::string text = b.build({b.reshape(y, {2, 3})});
  expect(text.find("tf.aliasing_output = 0 : i32") != std::string::npos, "aliasing attribute emitted");
  expect(text.find("\"stablehlo.transpose\"(%arg0) {permutation = array<i64: 1, 0>}") != std::string::npos,
         "transpose in generic form");
  HloBuilder b2;
  Value x2 = b2.arg({ElementType::kF32, {2, 3}}, 0);
  Value y2 = b2.transpose(x2, {1, 0});
  expect(b2.build({b2.reshape(y2, {2, 3})}) == text, "builder text is deterministic");
  expect(scalar_literal(INFINITY, ElementType::kF32) == "0x7F800000", "inf literal");
  expect(scalar_literal(-INFINITY, ElementType::kBF16) == "0xFF80", "bf16 -inf literal");
}

// A storage update as a fused graph writes it: reshape(f(reshape(flat), scalar), flat). The elementwise ops must be
// emitted on the flat shape (the reshapes and the scalar broadcast sink below them), so XLA can write the result
// into the donated buffer; the values must be those of the 2-D computation.
void test_elementwise_sinks_reshapes(const Client& client, CompileCache& cache) {
  HloBuilder b;
  Value flat = b.arg({ElementType::kF32, {6}}, 0);
  Value other = b.arg({ElementType::kF32, {6}});
  Value s = b.arg({ElementType::kF32, {}});
  Value x = b.reshape(flat, {2, 3});
  Value y = b.reshape(other, {2, 3});
  Value scale = b.broadcast_in_dim(b.unary("stablehlo.abs", s), {2, 3}, {});
  Value z = b.select(b.compare(CompareDirection::kLt, x, y), b.binary("stablehlo.multiply", x, scale), y);
  Value out = b.reshape(b.convert(b.convert(z, ElementType::kF64), ElementType::kF32), {6});
  std::string text = b.build({out});
  auto flat_line = [&text](const std::string& op) {  // the line of `op` yields the flat shape
    size_t at = text.find("\"stablehlo." + op + "\"");
    if (at == std::string::npos) return false;
    std::string line = text.substr(at, text.find('\n', at) - at);
    return line.find("-> tensor<6x") != std::string::npos;
  };
  expect(flat_line("multiply") && flat_line("compare") && flat_line("select") && flat_line("convert"),
         "elementwise ops on reshapes of one shape are emitted on that shape");
  expect(text.find("\"func.return\"(%13)") != std::string::npos && text.find("%13 = \"stablehlo.convert\"") != std::string::npos,
         "the reshape back to the flat shape is the flat value itself");
  expect(text.find("\"stablehlo.abs\"(%arg2) : (tensor<f32>) -> tensor<f32>") != std::string::npos,
         "an elementwise op of a broadcast scalar is emitted on the scalar");
  std::vector<float> a = {1, 5, -2, 4, 0, 7}, c = {2, 3, -1, 4, 1, 6};
  float scalar = -3;
  auto ba = client.buffer_from_host(a.data(), ElementType::kF32, {6}, {}, 0);
  auto bc = client.buffer_from_host(c.data(), ElementType::kF32, {6}, {}, 0);
  auto bs = client.buffer_from_host(&scalar, ElementType::kF32, {}, {}, 0);
  ExecuteResult r = cache.get_or_compile(text)->execute({ba.get(), bc.get(), bs.get()}, client.device(0).raw);
  r.done.await();
  std::vector<float> got(6);
  r.outputs[0]->to_host(got.data(), sizeof(float) * 6);
  expect(got == std::vector<float>({3, 3, -6, 4, 0, 6}), "sunk elementwise program values");
}
// A typed XLA FFI handler without torch: out = 3 * in, or an error when the operand holds a negative first element.
xla_ffi::Error* triple(xla_ffi::CallFrame* frame) {
  if (xla_ffi::answer_metadata_query(frame) || frame->stage != xla_ffi::Stage::kExecute) return nullptr;
  const auto* in = static_cast<const xla_ffi::Buffer*>(frame->args.items[0]);
  const auto* out = static_cast<const xla_ffi::Buffer*>(frame->rets.items[0]);
  const float* x = static_cast<const float*>(in->data);
  if (x[0] < 0) {
    xla_ffi::ErrorCreateArgs args{sizeof(args), nullptr, "core_test.triple: negative input", xla_ffi::ErrorCode::kInvalidArgument};
    return frame->api->error_create(&args);
  }
  for (int64_t i = 0; i < in->dims[0]; ++i) static_cast<float*>(out->data)[i] = 3 * x[i];
  return nullptr;
}

void test_ffi_custom_call(const Client& client, CompileCache& cache) {
  bool registered = client.plugin().register_ffi_handler("core_test.triple", "Host", reinterpret_cast<void*>(&triple));
  expect(registered, "the XLA-CPU plugin registers a typed FFI handler");
  if (!registered) return;
  HloBuilder b;
  TensorType t{ElementType::kF32, {3}};
  Value x = b.arg(t);
  Value y = b.custom_call("core_test.triple", {b.binary("stablehlo.add", x, x)}, t);
  auto exe = cache.get_or_compile(b.build({y}));
  std::vector<float> a = {1, 2, -4}, got(3);
  auto ba = client.buffer_from_host(a.data(), ElementType::kF32, {3}, {}, 0);
  ExecuteResult r = exe->execute({ba.get()}, client.device(0).raw);
  r.done.await();
  r.outputs[0]->to_host(got.data(), sizeof(float) * 3);
  expect(got == std::vector<float>({6, 12, -24}), "a program calls the FFI handler with its operand and result");
  a[0] = -1;
  auto bn = client.buffer_from_host(a.data(), ElementType::kF32, {3}, {}, 0);
  std::string message;
  try {
    ExecuteResult bad = exe->execute({bn.get()}, client.device(0).raw);
    bad.done.await();
    bad.outputs[0]->to_host(got.data(), sizeof(float) * 3);
  } catch (const Error& e) {
    message = e.what();
  }
  expect(message.find("core_test.triple: negative input") != std::string::npos,
         "a handler's error reaches the caller as torch_tpu::Error: " + message);
}

void test_transposed_values_are_known() {
  HloBuilder b;
  Value x = b.arg({ElementType::kF32, {2, 3}});
  Value t = b.transpose(x, {1, 0});
  const HloBuilder::Transposed* found = b.transposed(t);
  expect(found != nullptr && found->source.name == x.name && found->permutation == std::vector<int64_t>({1, 0}),
         "the builder knows a transpose's source and permutation");
  expect(b.transposed(x) == nullptr, "an argument is not a transpose");
}

void test_keep_host_heap() {
  const HostHeapPolicy first = keep_host_heap();
#if defined(__GLIBC__)
  expect(first.applied && first.detail.find("mmap_max=0") != std::string::npos, "glibc takes the kept-heap settings");
#else
  expect(!first.applied, "only glibc's allocator is changed");
#endif
  expect(keep_host_heap().applied == first.applied, "setting the policy twice is harmless");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: core_test PLUGIN_PATH\n");
    return 2;
  }
  test_builder_text();
  test_missing_plugin();
  test_transposed_values_are_known();
  test_keep_host_heap();  // before the client starts, as torch_tpu.runtime does
  {
    auto client = Client::create(Plugin::load(argv[1]), {{"cpu_device_count", int64_t{2}}});
    expect(client->devices().size() == 2, "two CPU devices");
    CompileCache cache(client, CompileSettings{});
    test_round_trip(*client);
    test_add_program(*client, cache);
    test_malformed_program(cache);
    test_called_function(*client, cache);
    test_elementwise_sinks_reshapes(*client, cache);
    test_ffi_custom_call(*client, cache);
  }
  expect(runtime_counters().live_buffers == 0, "no live buffers after the tests");
  expect(runtime_counters().live_executables == 0, "no live executables after the tests");
  std::printf("core_test: %d passed, %d failed\n", g_passed, g_failures);
  return g_failures == 0 ? 0 : 1;
}
