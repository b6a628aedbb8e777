#include "runtime/element_type.h"

#include "runtime/error.h"

namespace torch_tpu {
namespace {

struct TypeRow {
  ElementType type;
  int64_t size;
  const char* mlir;
  const char* name;
};

constexpr TypeRow kTypes[] = {
    {ElementType::kPred, 1, "i1", "pred"},   {ElementType::kS8, 1, "i8", "s8"},
    {ElementType::kS16, 2, "i16", "s16"},    {ElementType::kS32, 4, "i32", "s32"},
    {ElementType::kS64, 8, "i64", "s64"},    {ElementType::kU8, 1, "ui8", "u8"},
    {ElementType::kU16, 2, "ui16", "u16"},   {ElementType::kU32, 4, "ui32", "u32"},
    {ElementType::kU64, 8, "ui64", "u64"},   {ElementType::kF16, 2, "f16", "f16"},
    {ElementType::kF32, 4, "f32", "f32"},    {ElementType::kF64, 8, "f64", "f64"},
    {ElementType::kBF16, 2, "bf16", "bf16"}, {ElementType::kC64, 8, "complex<f32>", "c64"},
    {ElementType::kC128, 16, "complex<f64>", "c128"},
    {ElementType::kF8E5M2, 1, "f8E5M2", "f8e5m2"},
    {ElementType::kF8E4M3FN, 1, "f8E4M3FN", "f8e4m3fn"},
    {ElementType::kF8E5M2FNUZ, 1, "f8E5M2FNUZ", "f8e5m2fnuz"},
    {ElementType::kF8E4M3FNUZ, 1, "f8E4M3FNUZ", "f8e4m3fnuz"},
};

const TypeRow& row(ElementType type) {
  for (const auto& r : kTypes) {
    if (r.type == type) return r;
  }
  fail(ErrorCode::kInvalidArgument, "element_type", "unsupported element type " + std::to_string(static_cast<int>(type)));
}

}  // namespace

int64_t element_size(ElementType type) { return row(type).size; }
const char* mlir_name(ElementType type) { return row(type).mlir; }
const char* element_type_name(ElementType type) { return row(type).name; }

ElementType element_type_from_name(const std::string& name) {
  for (const auto& r : kTypes) {
    if (name == r.name) return r.type;
  }
  fail(ErrorCode::kInvalidArgument, "element_type", "unknown element type name '" + name + "'");
}

bool is_floating(ElementType t) {
  return t == ElementType::kF16 || t == ElementType::kF32 || t == ElementType::kF64 || t == ElementType::kBF16 ||
         is_float8(t);
}
bool is_float8(ElementType t) {
  return t == ElementType::kF8E5M2 || t == ElementType::kF8E4M3FN || t == ElementType::kF8E5M2FNUZ ||
         t == ElementType::kF8E4M3FNUZ;
}
bool is_complex(ElementType t) { return t == ElementType::kC64 || t == ElementType::kC128; }
bool is_signed_integer(ElementType t) {
  return t == ElementType::kS8 || t == ElementType::kS16 || t == ElementType::kS32 || t == ElementType::kS64;
}
bool is_unsigned_integer(ElementType t) {
  return t == ElementType::kU8 || t == ElementType::kU16 || t == ElementType::kU32 || t == ElementType::kU64;
}

}  // namespace torch_tpu
