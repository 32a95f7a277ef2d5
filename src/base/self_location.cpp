#include "base/self_location.h"

#include <dlfcn.h>

#include <system_error>

namespace plugboard {

std::filesystem::path running_executable_folder() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::path() : exe.parent_path();
}

std::filesystem::path plugboard_code_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&plugboard_code_folder), &info) == 0 || !info.dli_fname) return {};
  // For code in the main program the loader reports argv[0], which may be a bare or relative name
  // (resolved against whatever the working folder is): only an absolute path is trusted.
  if (info.dli_fname[0] != '/') return {};
  std::error_code ec;
  auto file = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path() : file.parent_path();
}

}  // namespace plugboard
