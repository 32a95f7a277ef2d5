// The declared types of XLA's DebugOptions fields, by name: what a compile option's value must be.
//
// XLA applies CompileOptionsProto.env_option_overrides by reflection on xla.DebugOptions and refuses an
// override whose value has another type than the field ("While setting option xla_dump_to, '123' is not
// a valid string value"), so plugboard types each value by its field's declared type instead of by what
// the text looks like: xla_dump_to=123 is the string "123".
#pragma once

#include <optional>
#include <string_view>

namespace plugboard {

enum class XlaOptionType { kBool, kInt32, kInt64, kFloat, kDouble, kString, kEnum };

// "bool", "int32", ..., "enum" (as xla.proto writes them).
std::string_view xla_option_type_name(XlaOptionType t);

// The declared type of the singular scalar DebugOptions field `name`; nullopt for a name not in the
// table (an option newer than the table, or a repeated/message field, which env overrides cannot set).
std::optional<XlaOptionType> xla_option_type(std::string_view name);

}  // namespace plugboard
