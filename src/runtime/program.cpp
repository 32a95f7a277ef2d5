#include "runtime/program.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace plugboard {
namespace {

constexpr std::string_view kBytecodeMagic = "ML\xEFR";

// After the magic: the bytecode version (a varint), then the NUL-terminated producer string, which
// StableHLO portable artifacts set to "StableHLO_vX.Y.Z".
std::optional<SemVer> producer_version(std::string_view bytes) {
  size_t pos = kBytecodeMagic.size();
  // MLIR's varint: the count of trailing zero bits of the first byte tells the total length.
  if (pos >= bytes.size()) return std::nullopt;
  unsigned char first = static_cast<unsigned char>(bytes[pos]);
  size_t len = first == 0 ? 9 : static_cast<size_t>(__builtin_ctz(first)) + 1;
  pos += len;
  size_t end = bytes.find('\0', pos);
  if (end == std::string_view::npos) return std::nullopt;
  std::string_view producer = bytes.substr(pos, end - pos);
  constexpr std::string_view kPrefix = "StableHLO_v";
  if (!producer.starts_with(kPrefix)) return std::nullopt;
  return parse_semver(producer.substr(kPrefix.size()));
}

}  // namespace

std::string format_name(ProgramFormat f) {
  return f == ProgramFormat::kMlirBytecode ? "MLIR bytecode" : "MLIR text";
}

Expected<Program> Program::from_bytes(std::string bytes, std::string name) {
  if (bytes.empty()) return invalid_argument("program " + name + " is empty");
  Program p;
  p.name_ = std::move(name);
  if (std::string_view(bytes).starts_with(kBytecodeMagic)) {
    p.format_ = ProgramFormat::kMlirBytecode;
    p.stablehlo_version_ = producer_version(bytes);
  } else {
    p.format_ = ProgramFormat::kMlirText;
  }
  p.bytes_ = std::move(bytes);
  return p;
}

Expected<Program> Program::from_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return make_error(Code::kNotFound, "program file " + path.string() + " does not exist or is not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return make_error(err == EACCES ? Code::kPermissionDenied : Code::kUnavailable,
                      "cannot open program file " + path.string() + ": " + std::strerror(err));
  }
  std::ostringstream content;
  content << in.rdbuf();
  return from_bytes(std::move(content).str(), path.string());
}

}  // namespace plugboard
