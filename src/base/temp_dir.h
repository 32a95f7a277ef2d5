// A temporary folder removed (with what is left in it) when its owner goes: scratch space for a
// download or a check, on every path out.
#pragma once

#include <filesystem>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace plugboard {

class TempDir {
 public:
  // A new folder "<parent>/<prefix>XXXXXX".
  static Expected<TempDir> create(const std::filesystem::path& parent, std::string_view prefix = "tmp-");
  TempDir(TempDir&& other) noexcept : path_(std::exchange(other.path_, {})) {}
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();  // removes the folder and what is left in it

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TempDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace plugboard
