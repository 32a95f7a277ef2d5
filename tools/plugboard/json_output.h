// JSON as the CLI prints it. Text from plugins and files need not be UTF-8, and nlohmann's dump throws on
// a string that is not (type_error 316), which would end the CLI in std::terminate: invalid bytes are
// printed as U+FFFD instead.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace plugboard::cli {

inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace plugboard::cli
