// PJRT create options as JSON, the way manifests and the isolation protocol write them: an object whose
// values are strings, integers, floats, booleans or lists of integers:
//   {"cpu_device_count": 4, "fault": "crash"}
// Read strictly (strict_json rules): integers must fit int64, floats must be finite as a float, names
// and strings must hold no control character.
#pragma once

#include <nlohmann/json.hpp>

#include <vector>

#include "base/status.h"
#include "plugin/plugin.h"

namespace plugboard::select {

nlohmann::ordered_json create_options_to_json(const std::vector<NamedValue>& options);
// `where` names the field in errors ("targets[2].create_options").
Expected<std::vector<NamedValue>> create_options_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace plugboard::select
