#include "base/errno_error.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace plugboard {

Code code_from_errno(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR: return Code::kNotFound;
    case EACCES:
    case EPERM:
    case EROFS: return Code::kPermissionDenied;
    case EEXIST: return Code::kAlreadyExists;
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE:
    case ENOMEM: return Code::kResourceExhausted;
    case EISDIR:
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL: return Code::kInvalidArgument;
    default: return Code::kUnknown;
  }
}

std::unexpected<Error> errno_error(int err, std::string_view what) {
  return make_error(code_from_errno(err), std::string(what) + ": " + std::strerror(err));
}

}  // namespace plugboard
