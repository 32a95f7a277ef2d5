// LAPACK's routines that plugboard's kernels call, from the system's shared library (Debian:
// liblapack3, reference LAPACK 3.11, liblapack.so.3), opened once per process at first use.
#pragma once

#include <cstddef>

#include "base/status.h"

namespace plugboard::lapack {

using Int = int;  // LP64 LAPACK: Fortran INTEGER is 32 bits (Debian's liblapack3)

// Fortran's calling convention: every argument by address; each CHARACTER argument adds a hidden
// length, by value, after the others (gfortran).
template <class T>
using Syevd = void(const char* jobz, const char* uplo, const Int* n, T* a, const Int* lda, T* w, T* work,
                   const Int* lwork, Int* iwork, const Int* liwork, Int* info, size_t jobz_len, size_t uplo_len);
template <class T>
using Gesdd = void(const char* jobz, const Int* m, const Int* n, T* a, const Int* lda, T* s, T* u, const Int* ldu,
                   T* vt, const Int* ldvt, T* work, const Int* lwork, Int* iwork, Int* info, size_t jobz_len);

struct Functions {
  Syevd<float>* ssyevd = nullptr;
  Syevd<double>* dsyevd = nullptr;
  Gesdd<float>* sgesdd = nullptr;
  Gesdd<double>* dgesdd = nullptr;

  template <class T> Syevd<T>* syevd() const;
  template <class T> Gesdd<T>* gesdd() const;
};

template <> inline Syevd<float>* Functions::syevd<float>() const { return ssyevd; }
template <> inline Syevd<double>* Functions::syevd<double>() const { return dsyevd; }
template <> inline Gesdd<float>* Functions::gesdd<float>() const { return sgesdd; }
template <> inline Gesdd<double>* Functions::gesdd<double>() const { return dgesdd; }

// The routines, from PLUGBOARD_LAPACK (a path) when set, else liblapack.so.3 on the loader's path.
// Opened once; the outcome (the table, or the error naming the library and what it lacks) is
// remembered for the life of the process. Thread-safe.
Expected<const Functions*> functions();

}  // namespace plugboard::lapack
