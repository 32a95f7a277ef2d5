// The ROCm platform (see platforms/platform.h): its traits, registered in platforms/registry.cpp.
#pragma once

#include "platforms/platform.h"

namespace plugboard::platforms {

PlatformTraits rocm_platform();

}  // namespace plugboard::platforms
