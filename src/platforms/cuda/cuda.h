// The CUDA platform (see platforms/platform.h): its traits, registered in platforms/registry.cpp.
#pragma once

#include "platforms/platform.h"

namespace plugboard::platforms {

PlatformTraits cuda_platform();

}  // namespace plugboard::platforms
