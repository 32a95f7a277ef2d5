/// \file
/// Errors as values: every fallible call in plugboard returns Expected<T> (or Status for no value).
///
/// An Error carries a canonical code (the same numbering as PJRT_Error_Code, so a plugin's code passes
/// through unchanged), a message that names what is at fault (file, plugin, argument, field), and the
/// context it gathered on its way up ("compiling program.mlir", "loading plugin /x/y.so"). Nothing in the
/// library throws across its boundary.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace plugboard {

/// Same values as PJRT_Error_Code (and absl::StatusCode).
enum class Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

/// "INVALID_ARGUMENT", ...; "CODE(n)" for a value outside the table.
std::string code_name(Code code);

/// A failure: a code, the message of the layer (or plugin) that failed, and what each layer above
/// was doing. Copyable; what Expected and Status carry.
class Error {
 public:
  /// An error with `code` and `message` and no context yet.
  Error(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  /// The canonical code (PJRT_Error_Code's numbering).
  Code code() const { return code_; }
  /// The innermost message, as the failing layer (or plugin) wrote it.
  const std::string& message() const { return message_; }
  /// Outermost first: what was being done when the error came up through each layer.
  const std::vector<std::string>& context() const { return context_; }

  /// Adds what the caller was doing ("compiling add.mlir"). Returns *this for chaining.
  Error& annotate(std::string what) & {
    context_.push_back(std::move(what));
    return *this;
  }
  /// The same for a temporary: `return std::move(error).annotate("...")`.
  Error&& annotate(std::string what) && {
    context_.push_back(std::move(what));
    return std::move(*this);
  }

  /// "compiling x.mlir: loading plugin p.so: INVALID_ARGUMENT: <message>"
  std::string to_string() const;

 private:
  Code code_;
  std::string message_;
  std::vector<std::string> context_;  ///< innermost first as stored; printed outermost first
};

/// A value or the Error that prevented it: what every fallible call returns.
template <class T>
using Expected = std::expected<T, Error>;
/// Success or an Error, for calls with no value.
using Status = std::expected<void, Error>;

/// An Error with `code` and `message`, ready to return from a function returning Expected or Status.
inline std::unexpected<Error> make_error(Code code, std::string message) {
  return std::unexpected<Error>(Error(code, std::move(message)));
}
/// make_error(Code::kInvalidArgument, message).
inline std::unexpected<Error> invalid_argument(std::string message) {
  return make_error(Code::kInvalidArgument, std::move(message));
}
/// A successful Status.
inline Status ok() { return {}; }

/// Adds context to the error of a failed result; passes a good one through.
template <class T>
Expected<T> annotate(Expected<T> result, std::string what) {
  if (!result) result.error().annotate(std::move(what));
  return result;
}

}  // namespace plugboard

/// \cond INTERNAL
#define PB_CONCAT_INNER(a, b) a##b
#define PB_CONCAT(a, b) PB_CONCAT_INNER(a, b)
/// \endcond

/// Returns the error of an Expected or Status expression from the enclosing function (which returns
/// an Expected or a Status); goes on when it succeeded.
#define PB_RETURN_IF_ERROR(expr)                                          \
  do {                                                                    \
    if (auto pb_status_ = (expr); !pb_status_)                           \
      return std::unexpected<::plugboard::Error>(std::move(pb_status_).error()); \
  } while (0)

/// Evaluates an Expected expression: returns its error from the enclosing function, or assigns its
/// value to `lhs` (a declaration, `auto x`, or an lvalue).
#define PB_ASSIGN_OR_RETURN(lhs, expr) PB_ASSIGN_OR_RETURN_IMPL(PB_CONCAT(pb_result_, __LINE__), lhs, expr)
/// \cond INTERNAL
#define PB_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                      \
  auto tmp = (expr);                                                  \
  if (!tmp) return std::unexpected<::plugboard::Error>(std::move(tmp).error()); \
  lhs = std::move(*tmp)
/// \endcond
