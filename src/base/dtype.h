// Element types: the public header (include/plugboard/dtype.h) is the one definition.
#pragma once

#include "plugboard/dtype.h"
