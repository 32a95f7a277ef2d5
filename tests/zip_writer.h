// Zip archives (wheels) for the tests, written by Python's zipfile through fixtures/make_zip.py: an
// implementation independent of plugboard's reader (src/fetch/zip_archive.h), so a test checks the
// reader against what real wheels are made with.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/hex.h"
#include "base/subprocess.h"

namespace plugboard::testing {

struct ZipMember {
  std::string name;
  std::optional<std::filesystem::path> file;  // the content: a file on disk, or
  std::string content;                        // these bytes,
  uint64_t repeat = 1;                        // repeated this many times
  std::string method;                         // "stored", "deflated", "bzip2"; empty: stored for .so, else deflated
  std::optional<uint32_t> mode;               // st_mode with its type bits (S_IFLNK | 0777: a symbolic link)
  bool force_zip64 = false;                   // a zip64 local header
};

struct ZipOptions {
  // Sizes, offsets and counts past this are written as zip64 (central directory extra fields, the
  // zip64 end record and its locator), however small the archive.
  std::optional<uint64_t> zip64_limit;
  // Written as to a pipe (a stream that cannot seek): each member's CRC-32 and sizes in a data
  // descriptor after its data (general purpose flag bit 3), zeros in its local header.
  bool streamed = false;
};

// Writes `path`; a failure fails the calling test (check with ASSERT_NO_FATAL_FAILURE).
inline void write_zip(const std::filesystem::path& path, const std::vector<ZipMember>& members,
                      const ZipOptions& options = {}) {
  nlohmann::json spec = {{"path", path.string()}, {"members", nlohmann::json::array()}};
  if (options.zip64_limit) spec["zip64_limit"] = *options.zip64_limit;
  if (options.streamed) spec["streamed"] = true;
  for (const ZipMember& m : members) {
    nlohmann::json j = {{"name", m.name}, {"force_zip64", m.force_zip64}};
    if (m.file) {
      j["file"] = m.file->string();
    } else {
      j["hex"] = hex_encode(std::as_bytes(std::span(m.content.data(), m.content.size())));
      j["repeat"] = m.repeat;
    }
    if (!m.method.empty()) j["method"] = m.method;
    if (m.mode) j["mode"] = *m.mode;
    spec["members"].push_back(std::move(j));
  }
  const std::filesystem::path spec_path = path.string() + ".spec.json";
  std::ofstream(spec_path) << spec.dump();
  SpawnOptions o;
  o.argv = {"python3", std::string(PLUGBOARD_FIXTURES_DIR) + "/make_zip.py", spec_path.string()};
  o.search_path = true;
  o.capture = Capture::kCombined;
  auto child = Subprocess::spawn(o);
  ASSERT_TRUE(child) << child.error().to_string();
  std::string output;
  if (!child->read_output_until(Clock::now() + std::chrono::seconds(120), output)) child->kill();
  const ExitStatus status = child->reap();
  std::filesystem::remove(spec_path);
  ASSERT_TRUE(status.success()) << "make_zip.py " << path << " " << status.describe() << ":\n" << output;
}

}  // namespace plugboard::testing
