#include "select/create_options_json.h"

namespace plugboard::select {

nlohmann::ordered_json create_options_to_json(const std::vector<NamedValue>& options) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (const auto& o : options) std::visit([&](const auto& v) { j[o.name] = v; }, o.value);
  return j;
}

Expected<std::vector<NamedValue>> create_options_from_json(const nlohmann::ordered_json& j, const std::string& where) {
  if (!j.is_object()) return invalid_argument(where + " must be an object of option name to value");
  std::vector<NamedValue> out;
  for (const auto& [name, v] : j.items()) {
    NamedValue o{name, {}};
    if (v.is_string()) o.value = v.get<std::string>();
    else if (v.is_boolean()) o.value = v.get<bool>();
    else if (v.is_number_integer()) o.value = v.get<int64_t>();
    else if (v.is_number_float()) o.value = v.get<float>();
    else if (v.is_array()) {
      std::vector<int64_t> list;
      for (const auto& e : v) {
        if (!e.is_number_integer()) return invalid_argument(where + "." + name + " must be a list of integers");
        list.push_back(e.get<int64_t>());
      }
      o.value = std::move(list);
    } else {
      return invalid_argument(where + "." + name + " must be a string, number, boolean or list of integers");
    }
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace plugboard::select
