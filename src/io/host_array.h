// Host arrays: the public header (include/plugboard/host_array.h) is the one definition.
#pragma once

#include "plugboard/host_array.h"
