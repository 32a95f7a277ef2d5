#include "lapack/library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <type_traits>
#include <string>

namespace plugboard::lapack {

namespace {

Expected<const Functions*> open_library() {
  const char* env = std::getenv("PLUGBOARD_LAPACK");
  const std::string path = env && *env ? env : "liblapack.so.3";
  // Never closed: handlers registered in plugins point into it for the life of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return make_error(Code::kNotFound, "LAPACK (" + path + ") cannot be opened: " + (why ? why : "unknown reason") +
                                           " (Debian: apt-get install liblapack3; or set PLUGBOARD_LAPACK to a "
                                           "LAPACK shared library)");
  }
  static Functions table;
  std::string missing;
  auto find = [&](auto*& fn, const char* symbol) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, symbol));
    if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  find(table.ssyevd, "ssyevd_");
  find(table.dsyevd, "dsyevd_");
  find(table.sgesdd, "sgesdd_");
  find(table.dgesdd, "dgesdd_");
  if (!missing.empty()) return make_error(Code::kNotFound, "LAPACK (" + path + ") has no " + missing);
  return &table;
}

}  // namespace

Expected<const Functions*> functions() {
  static const Expected<const Functions*> outcome = open_library();
  return outcome;
}

}  // namespace plugboard::lapack
