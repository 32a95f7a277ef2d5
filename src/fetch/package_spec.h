// Package names as pip spells them: "NAME==VERSION" arguments, PEP 503 normalization, and the
// name and version a wheel's file name carries (PEP 427).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fetch/fetch.h"

namespace plugboard::fetch {

// "xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl" -> {"xla_cpu_pjrt", "0.0.1"}; nullopt for
// a name that is not a wheel's.
struct WheelFileName {
  std::string name;
  std::string version;
};
std::optional<WheelFileName> parse_wheel_file_name(std::string_view file_name);

// Whether a wheel file name is one of NAME==VERSION's wheels.
bool wheel_is_for(std::string_view file_name, const PackageSpec& spec);

}  // namespace plugboard::fetch
