#include "backend/stablehlo_call.h"

#include <c10/util/Exception.h>

#include "exec/op_record.h"
#include "exec/tensor_program.h"

namespace torch_tpu {

std::vector<at::Tensor> record_stablehlo_call(const std::string& callee, const std::string& functions,
                                              const std::vector<at::Tensor>& inputs,
                                              const std::vector<std::vector<int64_t>>& sizes,
                                              const std::vector<at::ScalarType>& dtypes) {
  TORCH_CHECK(sizes.size() == dtypes.size() && !sizes.empty(), callee, ": needs one size and one dtype per result");
  int device = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& t = inputs[i];
    TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, callee, ": argument ", i,
                " is on ", t.defined() ? t.device().str() : std::string("no device"), ", expected a tpu tensor");
    TORCH_CHECK(device < 0 || t.device().index() == device, callee, ": arguments on tpu:", device, " and ",
                t.device().str(), "; expected one device");
    device = t.device().index();
  }
  TORCH_CHECK(device >= 0, callee, ": needs at least one tpu tensor argument to pick the device");
  std::vector<at::Tensor> outputs;
  for (size_t i = 0; i < sizes.size(); ++i) outputs.push_back(new_output(device, sizes[i], dtypes[i]));
  // The callee's name carries a digest of its text, so it is the whole structure besides the tensors' types.
  record_custom_op(device, "stablehlo_call:" + callee, inputs, outputs,
                   [callee, functions](TensorProgram& p, const std::vector<at::Tensor>& in,
                                       const std::vector<at::Tensor>& out) {
                     std::vector<Value> operands;
                     for (const at::Tensor& t : in) operands.push_back(p.read(t));
                     std::vector<TensorType> types;
                     for (const at::Tensor& t : out) {
                       types.push_back(TensorType{element_type_of(t.scalar_type()), t.sizes().vec()});
                     }
                     std::vector<Value> results = p.builder().call(callee, functions, operands, types);
                     for (size_t i = 0; i < out.size(); ++i) p.write(out[i], results[i]);
                   });
  return outputs;
}

}  // namespace torch_tpu
