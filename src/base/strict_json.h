// JSON from files plugboard does not trust (bundle manifests, the fetch cache's index, lock files, the
// isolation child's answer): parsed without exceptions, without recursion past kMaxNesting levels,
// with duplicate keys refused, and read through typed getters that say which field is wrong instead
// of converting (nlohmann's get<int>() would turn 2^32+1 into 1 and "1.5" into 1).
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace plugboard::strict_json {

using json = nlohmann::json;

// Parses a whole document. INVALID_ARGUMENT naming `what` (a file's path) on a syntax error, nesting
// past kMaxNesting, a duplicate key (its JSON path), or a document that is not an object when
// `want_object`.
Expected<json> parse(std::string_view text, std::string_view what, bool want_object = true);

// The strings plugboard keeps: names, platforms, file paths, versions. None may hold a NUL (the part
// after it would be cut off by every C API) or another control character (a terminal would obey it).
enum class Text { kAny, kNoControl };

// Getters for field `key` of object `obj`; `where` names the object ("targets[2]") in messages. A
// missing field is INVALID_ARGUMENT unless the getter's optional form is used.
Expected<std::string> get_string(const json& obj, std::string_view key, std::string_view where,
                                 Text rule = Text::kNoControl);
Expected<std::optional<std::string>> get_optional_string(const json& obj, std::string_view key,
                                                         std::string_view where, Text rule = Text::kNoControl);
Expected<int64_t> get_int(const json& obj, std::string_view key, std::string_view where,
                          int64_t min = std::numeric_limits<int64_t>::min(),
                          int64_t max = std::numeric_limits<int64_t>::max());
Expected<uint64_t> get_uint(const json& obj, std::string_view key, std::string_view where,
                            uint64_t max = std::numeric_limits<uint64_t>::max());
Expected<bool> get_bool(const json& obj, std::string_view key, std::string_view where);
// The field itself, type-checked: kind is json::value_t::object or ::array.
Expected<const json*> get_container(const json& obj, std::string_view key, std::string_view where,
                                    json::value_t kind);

// A value (not a field) under the same rules, for array elements: `where` names it ("targets[2].file").
Expected<std::string> as_string(const json& v, std::string_view where, Text rule = Text::kNoControl);
Expected<int64_t> as_int(const json& v, std::string_view where, int64_t min = std::numeric_limits<int64_t>::min(),
                         int64_t max = std::numeric_limits<int64_t>::max());
Expected<uint64_t> as_uint(const json& v, std::string_view where, uint64_t max = std::numeric_limits<uint64_t>::max());

// INVALID_ARGUMENT when `text` has a NUL or a control character (rule kNoControl), naming `where` and
// the character's position.
Status check_text(std::string_view text, std::string_view where, Text rule = Text::kNoControl);

}  // namespace plugboard::strict_json
