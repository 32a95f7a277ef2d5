// A StableHLO program as bytes: MLIR text or a portable artifact (MLIR bytecode), told apart by
// content. For a portable artifact the StableHLO version it was serialized for is read from its
// producer string, so that a plugin too old for it is refused before compilation.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/semver.h"
#include "base/status.h"

namespace plugboard {

enum class ProgramFormat { kMlirText, kMlirBytecode };

class Program {
 public:
  // `name` is what error messages call it (a file name, "<inline>").
  static Expected<Program> from_bytes(std::string bytes, std::string name = "<inline>") noexcept;
  // Reads a regular file of at most kMaxProgramBytes (a FIFO, a device or a directory is refused
  // without reading a byte).
  static Expected<Program> from_file(const std::filesystem::path& path) noexcept;

  const std::string& bytes() const { return bytes_; }
  const std::string& name() const { return name_; }
  ProgramFormat format() const { return format_; }
  // For bytecode with a "StableHLO_vX.Y.Z" producer: that version (a StableHLO producer whose version
  // does not parse is refused by from_bytes). MLIR text is refused when nested deeper than kMaxNesting.
  const std::optional<SemVer>& stablehlo_version() const { return stablehlo_version_; }

 private:
  std::string bytes_;
  std::string name_;
  ProgramFormat format_ = ProgramFormat::kMlirText;
  std::optional<SemVer> stablehlo_version_;
};

std::string format_name(ProgramFormat f);

}  // namespace plugboard
