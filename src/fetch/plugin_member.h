// Which member of a wheel is the plugin: the table's path for a known package; for any other package,
// the .so member that exports GetPjrtApi (each .so is extracted and its .dynsym read).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "fetch/fetch.h"
#include "fetch/wheel.h"

namespace plugboard::fetch {

struct PluginMember {
  const WheelMember* member = nullptr;
  std::optional<ExtractedMember> extracted;  // set when inspection already extracted it
};

// `known` may be null. Temporary extractions go to `scratch_dir` and are removed unless returned.
// Errors name the package and the wheel: a known member missing from the wheel, no .so exporting
// GetPjrtApi, or several that do (listed).
Expected<PluginMember> find_plugin_member(const Wheel& wheel, const PackageSpec& spec, const KnownPackage* known,
                                          const std::filesystem::path& scratch_dir, bool progress);

// FAILED_PRECONDITION naming `what` unless `file` is a regular file and an ELF shared library that
// exports GetPjrtApi: a text file, a symbolic link's text or any other library named like a plugin is
// refused before it reaches a cache or a bundle.
Status check_pjrt_plugin_file(const std::filesystem::path& file, const std::string& what);

// A shared library by its name: "x.so" or "x.so.1".
bool is_shared_library_name(std::string_view member);

}  // namespace plugboard::fetch
