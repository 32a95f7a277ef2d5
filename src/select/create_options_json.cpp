#include "select/create_options_json.h"

#include <cmath>
#include <limits>

#include "base/strict_json.h"

namespace plugboard::select {

nlohmann::ordered_json create_options_to_json(const std::vector<NamedValue>& options) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& o : options) std::visit([&](const auto& v) { j[o.name] = v; }, o.value);
  return j;
}

Expected<std::vector<NamedValue>> create_options_from_json(const nlohmann::json& j, const std::string& where) {
  namespace sj = strict_json;
  if (!j.is_object()) return invalid_argument(where + " must be an object of option name to value");
  std::vector<NamedValue> out;
  for (const auto& [name, v] : j.items()) {
    const std::string field = where + "." + name;
    PB_RETURN_IF_ERROR(sj::check_text(name, "an option name in " + where));
    NamedValue o{name, {}};
    if (v.is_string()) {
      PB_ASSIGN_OR_RETURN(std::string s, sj::as_string(v, field));
      o.value = std::move(s);
    } else if (v.is_boolean()) {
      o.value = v.get<bool>();
    } else if (v.is_number_integer()) {
      PB_ASSIGN_OR_RETURN(int64_t i, sj::as_int(v, field));
      o.value = i;
    } else if (v.is_number_float()) {
      const double d = v.get<double>();
      if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
        return invalid_argument(field + " is " + v.dump() + ", out of the range of a float");
      o.value = static_cast<float>(d);
    } else if (v.is_array()) {
      std::vector<int64_t> list;
      for (size_t k = 0; k < v.size(); ++k) {
        if (!v[k].is_number_integer()) return invalid_argument(field + " must be a list of integers");
        PB_ASSIGN_OR_RETURN(int64_t i, sj::as_int(v[k], field + "[" + std::to_string(k) + "]"));
        list.push_back(i);
      }
      o.value = std::move(list);
    } else {
      return invalid_argument(field + " must be a string, number, boolean or list of integers");
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace plugboard::select
