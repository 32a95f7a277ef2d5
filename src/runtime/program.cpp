#include "runtime/program.h"

#include "base/nesting.h"
#include "base/no_throw.h"
#include "base/regular_file.h"
#include "base/terminal_text.h"

namespace plugboard {
namespace {

constexpr std::string_view kBytecodeMagic = "ML\xEFR";
constexpr std::string_view kStableHloPrefix = "StableHLO_v";

// A producer string as messages show it: at most 64 bytes, control characters spelled out.
std::string shown(std::string_view text) {
  return terminal_safe(text.substr(0, 64)) + (text.size() > 64 ? "..." : "");
}

// After the magic: the bytecode version (a varint), then the NUL-terminated producer string, which
// StableHLO portable artifacts set to "StableHLO_vX.Y.Z". Nullopt when the producer is not StableHLO's
// (plain MLIR bytecode: the plugin decides); an error when it claims to be StableHLO's but its version
// does not parse, since a version plugboard cannot compare must not skip the check.
Expected<std::optional<SemVer>> producer_version(std::string_view bytes, const std::string& name) {
  size_t pos = kBytecodeMagic.size();
  // MLIR's varint: the count of trailing zero bits of the first byte tells the total length.
  if (pos >= bytes.size()) return std::optional<SemVer>();
  unsigned char first = static_cast<unsigned char>(bytes[pos]);
  size_t len = first == 0 ? 9 : static_cast<size_t>(__builtin_ctz(first)) + 1;
  pos += len;
  if (pos >= bytes.size()) return std::optional<SemVer>();
  size_t end = bytes.find('\0', pos);
  if (end == std::string_view::npos) return std::optional<SemVer>();
  std::string_view producer = bytes.substr(pos, end - pos);
  if (!producer.starts_with(kStableHloPrefix)) return std::optional<SemVer>();
  std::optional<SemVer> version = parse_semver(producer.substr(kStableHloPrefix.size()));
  if (!version)
    return invalid_argument("program " + name + " is a StableHLO portable artifact whose version '" +
                            shown(producer) + "' does not parse (expected StableHLO_vMAJOR.MINOR.PATCH)");
  return version;
}

}  // namespace

std::string format_name(ProgramFormat f) {
  return f == ProgramFormat::kMlirBytecode ? "MLIR bytecode" : "MLIR text";
}

Expected<Program> Program::from_bytes(std::string bytes, std::string name) noexcept {
  return no_throw("reading program", [&]() -> Expected<Program> {
    if (bytes.empty()) return invalid_argument("program " + name + " is empty");
    Program p;
    if (std::string_view(bytes).starts_with(kBytecodeMagic)) {
      p.format_ = ProgramFormat::kMlirBytecode;
      PB_ASSIGN_OR_RETURN(p.stablehlo_version_, producer_version(bytes, name));
    } else {
      // The plugins' MLIR parsers recurse once per bracket: a program nested thousands deep overflows
      // the stack of the thread that compiles it. Refused here, before any plugin sees it.
      p.format_ = ProgramFormat::kMlirText;
      PB_RETURN_IF_ERROR(check_nesting(bytes, Syntax::kMlir, "program " + name));
    }
    p.name_ = std::move(name);
    p.bytes_ = std::move(bytes);
    return p;
  });
}

Expected<Program> Program::from_file(const std::filesystem::path& path) noexcept {
  return no_throw("reading program", [&]() -> Expected<Program> {
    // Only a regular file, and at most kMaxProgramBytes of it: /dev/zero or a FIFO is refused at once.
    PB_ASSIGN_OR_RETURN(std::string content, annotate(read_regular_file(path, kMaxProgramBytes), "reading the program"));
    return from_bytes(std::move(content), path.string());
  });
}

}  // namespace plugboard
