// Downloading a wheel with pip: `python -m pip download --no-deps --only-binary=:all: NAME==VERSION -d DIR`.
// pip chooses the index (its own configuration, PIP_INDEX_URL, ...) and the wheel matching this machine;
// plugboard names no index of its own.
#pragma once

#include <filesystem>
#include <string>

#include "base/status.h"
#include "fetch/fetch.h"

namespace plugboard::fetch {

// Runs pip into the empty folder `dir` and returns the wheel it left there. A failure carries pip's
// own message (its last lines of output); an interpreter that cannot be run is named.
Expected<std::filesystem::path> pip_download(const PackageSpec& spec, const std::string& python,
                                             const std::filesystem::path& dir);

}  // namespace plugboard::fetch
