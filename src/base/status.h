// Errors as values: the public header (include/plugboard/status.h) is the one definition.
#pragma once

#include "plugboard/status.h"
