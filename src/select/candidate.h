// A candidate for the boot-time choice: one plugin file that could serve a target, where it came from,
// what it is expected to be (size, sha256) and how to probe for its devices without loading it.
// Candidates are plain values made by discovery (src/bundle) and judged by selection (select.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "platforms/registry.h"
#include "plugin/plugin.h"

namespace plugboard::select {

// Which device probe rules a candidate in or out before it is loaded (see probe.h): one platform's
// (platforms/registry.h), named as the platform is ("none", "cuda", "rocm", "tpu").
using platforms::ProbeKind;
using platforms::parse_probe_kind;
using platforms::probe_kind_name;

// A file the candidate needs besides its plugin (a companion library), verified like the plugin.
struct ExpectedFile {
  std::filesystem::path path;
  uint64_t size = 0;
  std::string sha256;
};

struct Candidate {
  std::string name;      // the target's name: "cpu", "cuda13", "rocm7"
  std::string platform;  // a platform's name (platforms/registry.h: "cpu", "cuda", ...) or "unknown"
  std::string source;    // where discovery found it: "bundle /opt/app/plugins", "PJRT_NAMES_AND_LIBRARY_PATHS"
  std::filesystem::path path;
  std::optional<uint64_t> size;       // expected size and sha256; unset: nothing to verify against
  std::optional<std::string> sha256;
  ProbeKind probe = ProbeKind::kNone;
  int priority = 0;  // higher first when no explicit order is given
  std::vector<NamedValue> create_options;
  std::vector<ExpectedFile> companions;
  // Programs compiled for this target ahead of time (a bundle's "precompiled"): compile-cache entries
  // named <key>.pbx, held to their size and sha256 when used (src/compile_cache).
  std::vector<ExpectedFile> precompiled;
  // Why those programs will not load on this machine (bundle/precompiled_host.h): they were compiled
  // on another processor or under other XLA_FLAGS. Empty when nothing says so.
  std::string precompiled_mismatch;
  // Where it came from, for policies and reports: "bundle" (the bundle asked for), "environment"
  // (PLUGBOARD_PLUGIN_PATH, PJRT_NAMES_AND_LIBRARY_PATHS), "python" (site-packages); empty when given
  // directly (a path handed to the CLI).
  std::string origin;
  // Set when discovery already knows this candidate cannot be used (e.g. its manifest entry names a
  // file outside the bundle): it then fails at the "found" stage with this reason.
  std::optional<Error> problem;
};

}  // namespace plugboard::select
