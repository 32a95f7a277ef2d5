// Downloading a wheel with pip: `python -m pip download --no-deps --only-binary=:all: --timeout S -d DIR
// -- NAME==VERSION`, or, when the wheel's hash is pinned, `... --require-hashes -r REQUIREMENTS` with the
// requirement and its `--hash=sha256:...` in a file (pip then refuses any other wheel itself).
// pip chooses the index (its own configuration, PIP_INDEX_URL, ...) and the wheel matching this machine;
// plugboard names no index of its own. `--` ends pip's options, so no spec is ever read as one.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/status.h"
#include "fetch/fetch.h"

namespace plugboard::fetch {

// Runs pip into the folder `dir` (empty but for the requirements file written there for a locked wheel)
// and returns the wheel it left there. A failure carries pip's
// own message (its last lines of output); an interpreter that cannot be run is named. pip runs in its
// own process group, killed (all of it) when it outlives options.pip_time_limit: DEADLINE_EXCEEDED.
Expected<std::filesystem::path> pip_download(const PackageSpec& spec, const std::optional<std::string>& wheel_sha256,
                                             const FetchOptions& options, const std::filesystem::path& dir);

}  // namespace plugboard::fetch
