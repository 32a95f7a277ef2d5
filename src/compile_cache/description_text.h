// An executable's description (name and signature, runtime/executable.h) as entry metadata, so that
// a hit need not ask the plugin for it again (PJRT_Executable_OptimizedProgram twice and an HLO parse:
// most of what loading costs beyond PJRT_Executable_DeserializeAndLoad).
//
//   name=main  parameters=f32[4,8];f32[4,8] (or ?)  results=f32[4,8]  results_dynamic=01 (or empty)
//   custom_calls=a<TAB>b (or ?)
#pragma once

#include <map>
#include <optional>
#include <string>

#include "runtime/executable.h"

namespace plugboard::compile_cache {

// Adds the description's fields to `metadata`; nothing when a name could not be written on one line.
void put_description(const Description& description, std::map<std::string, std::string>& metadata);

// The description in `metadata`; nullopt when it holds none or one that does not parse (then the
// plugin is asked, as for a fresh compile).
std::optional<Description> get_description(const std::map<std::string, std::string>& metadata);

}  // namespace plugboard::compile_cache
