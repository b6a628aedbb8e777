// Element types as PJRT numbers them (PJRT_Buffer_Type), with their sizes and StableHLO spellings.
#pragma once

#include <cstdint>
#include <string>

namespace torch_tpu {

enum class ElementType : int {
  kInvalid = 0,
  kPred = 1,
  kS8 = 2,
  kS16 = 3,
  kS32 = 4,
  kS64 = 5,
  kU8 = 6,
  kU16 = 7,
  kU32 = 8,
  kU64 = 9,
  kF16 = 10,
  kF32 = 11,
  kF64 = 12,
  kBF16 = 13,
  kC64 = 14,
  kC128 = 15,
  kF8E5M2 = 16,
  kF8E4M3FN = 17,
  kF8E5M2FNUZ = 19,
  kF8E4M3FNUZ = 20,
};

int64_t element_size(ElementType type);
// StableHLO element spelling: f32, i64, ui8, i1, complex<f32>, ...
const char* mlir_name(ElementType type);
// Short name used in Python and error messages: "f32", "s64", "u8", "pred", "c64", ...
const char* element_type_name(ElementType type);
ElementType element_type_from_name(const std::string& name);

bool is_floating(ElementType type);
bool is_float8(ElementType type);
bool is_complex(ElementType type);
bool is_signed_integer(ElementType type);
bool is_unsigned_integer(ElementType type);

}  // namespace torch_tpu
