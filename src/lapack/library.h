// LAPACK's routines that plugboard's kernels call, from the system's shared library (Debian:
// liblapack3, reference LAPACK 3.11, liblapack.so.3), opened once per process at first use.
#pragma once

#include <cstddef>
#include <string>

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

// The routines, from PLUGBOARD_LAPACK (a path) when set and the environment may be read, else
// liblapack.so.3 on the loader's path. Opened once per source; the outcome (the table, or the error
// naming the library and what it lacks) is remembered for the life of the process. Thread-safe.
Expected<const Functions*> functions();

// From now on PLUGBOARD_LAPACK is not read: functions() is liblapack.so.3 on the loader's path. A
// boot confined to its bundle (SelectionSettings::use_environment false) calls it once it has
// succeeded, for the whole process and for good: LAPACK's kernels are process-wide, so the confined
// client's kernels would otherwise take PLUGBOARD_LAPACK after a later boot that reads the
// environment. Kernels already running keep the table they have.
void ignore_environment() noexcept;

// One line for a boot report, opening nothing: once functions() opened LAPACK, the file the loader
// opened (past symbolic links) and why that one ("LAPACK: /usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3.11.0
// (liblapack.so.3 on the loader's path; PLUGBOARD_LAPACK=/x not read: use_environment is false)"), or
// why there is none; before, what will be opened ("LAPACK: liblapack.so.3, opened at its first use
// (...)"). Values from the environment are spelled out (terminal_safe).
std::string describe() noexcept;

}  // namespace plugboard::lapack
