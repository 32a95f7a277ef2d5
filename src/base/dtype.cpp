#include "base/dtype.h"

#include <array>

namespace plugboard {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeInfo, 17> kTable{{
    {DType::kBool, "bool", 1},     {DType::kI8, "i8", 1},         {DType::kI16, "i16", 2},
    {DType::kI32, "i32", 4},       {DType::kI64, "i64", 8},       {DType::kU8, "u8", 1},
    {DType::kU16, "u16", 2},       {DType::kU32, "u32", 4},       {DType::kU64, "u64", 8},
    {DType::kF16, "f16", 2},       {DType::kF32, "f32", 4},       {DType::kF64, "f64", 8},
    {DType::kBF16, "bf16", 2},     {DType::kC64, "c64", 8},       {DType::kC128, "c128", 16},
    {DType::kF8E5M2, "f8e5m2", 1}, {DType::kF8E4M3FN, "f8e4m3fn", 1},
}};

// The table lists the types in the order of their values (1, 2, ...): a lookup is an index.
constexpr bool listed_by_value() {
  for (size_t i = 0; i < kTable.size(); ++i)
    if (static_cast<size_t>(kTable[i].type) != i + 1) return false;
  return true;
}
static_assert(listed_by_value(), "kTable must list DType values 1, 2, ... in order");

const DTypeInfo* find(DType t) {
  const auto i = static_cast<size_t>(t) - 1;  // kInvalid (0) and negative values wrap past the end
  return i < kTable.size() ? &kTable[i] : nullptr;
}

}  // namespace

std::string dtype_name(DType t) {
  if (t == DType::kInvalid) return "invalid";
  if (const auto* info = find(t)) return std::string(info->name);
  return "dtype(" + std::to_string(static_cast<int>(t)) + ")";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& info : kTable)
    if (info.name == name) return info.type;
  return std::nullopt;
}

size_t dtype_size(DType t) {
  const auto* info = find(t);
  return info ? info->size : 0;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E5M2:
    case DType::kF8E4M3FN:
    case DType::kF32:
    case DType::kF64:
      return true;
    default:
      return false;
  }
}

bool dtype_is_complex(DType t) { return t == DType::kC64 || t == DType::kC128; }

const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> all = [] {
    std::vector<DType> v;
    for (const auto& info : kTable) v.push_back(info.type);
    return v;
  }();
  return all;
}

std::optional<size_t> element_count(std::span<const int64_t> dims) {
  size_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > SIZE_MAX / static_cast<size_t>(d)) return std::nullopt;
    n *= static_cast<size_t>(d);
  }
  return n;
}

Expected<size_t> byte_size(DType t, std::span<const int64_t> dims) {
  const size_t element = dtype_size(t);
  if (element == 0) return invalid_argument("dtype " + dtype_name(t) + " has no element size");
  bool empty = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) {
      return invalid_argument("dimension " + std::to_string(i) + " is negative (" + std::to_string(dims[i]) + ")");
    }
    empty = empty || dims[i] == 0;
  }
  if (empty) return size_t{0};  // whatever the other dimensions multiply to
  size_t n = element;
  for (int64_t d : dims) {
    if (n > SIZE_MAX / static_cast<size_t>(d)) {
      return make_error(Code::kOutOfRange, shape_string(t, std::vector<int64_t>(dims.begin(), dims.end())) +
                                               " is larger than the address space");
    }
    n *= static_cast<size_t>(d);
  }
  return n;
}

std::string shape_string(DType t, const std::vector<int64_t>& dims) {
  std::string s = dtype_name(t) + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

}  // namespace plugboard
