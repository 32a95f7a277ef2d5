// The table of known plugin packages (each platform's src/platforms/<platform>/known_packages.json,
// embedded at build time): which member of each wheel is the plugin, the platform it serves, the probe
// selection runs and its boot priority (the platform's, see platforms/registry.h, unless an entry
// gives its own).
#pragma once

#include <string_view>
#include <vector>

#include "fetch/fetch.h"

namespace plugboard::fetch {

// Parses a table ({"schema": 1, "packages": [...]}); errors name `source` and the field. An entry's
// platform must be one of platforms::platforms(); "probe" and "priority" are optional.
Expected<std::vector<KnownPackage>> parse_known_packages(std::string_view json_text, std::string_view source);

// The embedded table, parsed once. An error here means the build embedded a malformed table.
const Expected<std::vector<KnownPackage>>& embedded_known_packages();

}  // namespace plugboard::fetch
