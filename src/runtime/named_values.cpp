#include "runtime/named_values.h"

namespace plugboard::internal {

// PJRT NamedValues pointing into `options`, which must outlive them.
std::vector<PJRT_NamedValue> to_pjrt(const std::vector<NamedValue>& options) {
  std::vector<PJRT_NamedValue> out;
  out.reserve(options.size());
  for (const auto& o : options) {
    auto v = PB_PJRT_ARGS(PJRT_NamedValue);
    v.name = o.name.data();
    v.name_size = o.name.size();
    if (const auto* s = std::get_if<std::string>(&o.value)) {
      v.type = PJRT_NamedValue_kString;
      v.string_value = s->data();
      v.value_size = s->size();
    } else if (const auto* i = std::get_if<int64_t>(&o.value)) {
      v.type = PJRT_NamedValue_kInt64;
      v.int64_value = *i;
      v.value_size = 1;
    } else if (const auto* l = std::get_if<std::vector<int64_t>>(&o.value)) {
      v.type = PJRT_NamedValue_kInt64List;
      v.int64_array_value = l->data();
      v.value_size = l->size();
    } else if (const auto* f = std::get_if<float>(&o.value)) {
      v.type = PJRT_NamedValue_kFloat;
      v.float_value = *f;
      v.value_size = 1;
    } else {
      v.type = PJRT_NamedValue_kBool;
      v.bool_value = std::get<bool>(o.value);
      v.value_size = 1;
    }
    out.push_back(v);
  }
  return out;
}

}  // namespace plugboard::internal
