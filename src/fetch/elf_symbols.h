// Whether a shared library exports a symbol, read from its ELF .dynsym without loading it: how the
// plugin of a wheel not in the known-packages table is recognized (it exports GetPjrtApi).
#pragma once

#include <filesystem>
#include <string_view>

#include "base/status.h"

namespace plugboard::fetch {

// True when `path` is a 64-bit little-endian ELF file whose dynamic symbol table defines `symbol`.
// A file that is not such an ELF file yields false; a read error is an error naming the file.
Expected<bool> exports_dynamic_symbol(const std::filesystem::path& path, std::string_view symbol);

}  // namespace plugboard::fetch
