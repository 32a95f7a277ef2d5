#include "lapack/workspace.h"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace plugboard::lapack {

namespace {

template <class T>
std::string spelled(T value) {
  std::ostringstream s;
  s << std::fixed;
  s.precision(0);
  s << value;
  return s.str();
}

}  // namespace

template <class T>
Expected<Int> workspace_size(const char* target, T queried) {
  constexpr long double kMax = std::numeric_limits<Int>::max();
  if (!(queried >= 0))
    return make_error(Code::kInternal, std::string(target) + ": LAPACK's workspace query answered " + spelled(queried));
  // The largest answer a true size of at most INT_MAX can come back as: INT_MAX rounded into T (for a
  // float 2^31, which is how it rounds any size in (2^31 - 64, 2^31 - 1]); only above it is refused.
  if (queried > static_cast<T>(std::numeric_limits<Int>::max()))
    return make_error(Code::kOutOfRange, std::string(target) + ": LAPACK asks for a workspace of " + spelled(queried) +
                                             " elements, more than its " + std::to_string(sizeof(Int) * 8) +
                                             "-bit integer can count (" + std::to_string(std::numeric_limits<Int>::max()) +
                                             "): the matrix is too large for this LAPACK");
  const long double up = std::ceil(static_cast<long double>(std::nextafter(queried, std::numeric_limits<T>::infinity())));
  return static_cast<Int>(std::min(up, kMax));
}

template Expected<Int> workspace_size<float>(const char*, float);
template Expected<Int> workspace_size<double>(const char*, double);

}  // namespace plugboard::lapack
