// TempDir: mkdtemp, remove_all on destruction.
#include "base/temp_dir.h"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "base/errno_error.h"

namespace plugboard {

Expected<TempDir> TempDir::create(const std::filesystem::path& parent, std::string_view prefix) {
  std::string name = (parent / (std::string(prefix) + "XXXXXX")).string();
  if (::mkdtemp(name.data()) == nullptr) return errno_error(errno, "cannot create a temporary folder in " + parent.string());
  return TempDir(std::move(name));
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace plugboard
