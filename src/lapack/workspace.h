// The size a LAPACK workspace query answers, as the LAPACK integer the computing call takes.
//
// A query (lwork = -1) answers in the routine's element type: sgesdd's 16777217 elements come back
// as a float, which cannot hold that number. Reference LAPACK 3.11 rounds the answer up
// (sroundup_lwork); others (OpenBLAS) round to nearest or down, and the computing call then refuses
// the workspace (or overruns it). Truncating the float is therefore not enough, and a float above
// INT_MAX converted to int is undefined behaviour.
#pragma once

#include "base/status.h"
#include "lapack/library.h"

namespace plugboard::lapack {

// The workspace to allocate for `queried` (what the query put in work[0]): at least the true size
// whichever way LAPACK rounded it into T, i.e. the next T above `queried`, rounded up to an integer
// (one element of slack where T holds the size exactly), at most INT_MAX (LAPACK computed the size
// in its integer type, so the true size is never more). OUT_OF_RANGE, naming `target`, for an
// answer above INT_MAX as T holds it (a float's 2^31 is INT_MAX rounded, and gets INT_MAX); INTERNAL
// for a negative or NaN answer.
template <class T>
Expected<Int> workspace_size(const char* target, T queried);

}  // namespace plugboard::lapack
