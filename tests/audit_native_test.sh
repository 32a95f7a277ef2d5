#!/usr/bin/env bash
# scripts/audit_native.sh fails where it must, naming the file and the library: a library outside the
# allowlist (found by its ELF magic whatever the file is called), libplugboard.so.0 without the
# RUNPATH and the place that find it, an ELF file readelf cannot read, a RUNPATH or RPATH entry not
# relative to $ORIGIN, a glibc, libstdc++ (GLIBCXX_, CXXABI_) or libgcc_s (GCC_) version past its
# ceiling; and passes a clean folder.
#
#   audit_native_test.sh AUDIT_SCRIPT NEEDS_COMPANION.so CLEAN.so CXX.so
#
# NEEDS_COMPANION.so needs libcompanion_dep.so (a fixture library: on no allowlist); CLEAN.so needs
# only libc (with a GLIBC_2.x version); CXX.so is a C++ library (libplugboard.so: it needs CXXABI_
# and GCC_ versions).
set -euo pipefail
audit=$1 offender=$2 clean=$3 cxx=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_fail DIR PATTERN...: the audit of DIR exits 1 and its output matches every PATTERN.
expect_fail() {
  local dir=$1 out rc=0
  shift
  out=$("$audit" "$dir" 2>&1) || rc=$?
  [ "$rc" -eq 1 ] || fail "audit of $dir exited $rc, not 1:"$'\n'"$out"
  for pattern in "$@"; do
    grep -q -- "$pattern" <<< "$out" || fail "audit of $dir does not say '$pattern':"$'\n'"$out"
  done
  echo "$out"
}
expect_pass() {
  local out
  out=$("$audit" "$@" 2>&1) || fail "audit of $* failed:"$'\n'"$out"
  grep -q '^oldest glibc this runs on: 2\.' <<< "$out" || fail "no 'oldest glibc this runs on' line:"$'\n'"$out"
  echo "$out"
}

# A clean library passes, and a text file named like a library is no ELF file and is skipped.
mkdir -p "$work/clean"
cp "$clean" "$work/clean/libclean.so"
echo "not a library" > "$work/clean/libtext.so"
expect_pass "$work/clean"

# A library outside the allowlist, under a name that does not look like a library.
mkdir -p "$work/offender/sub"
cp "$offender" "$work/offender/sub/plugin.data"
expect_fail "$work/offender" "^offence: $work/offender/sub/plugin.data needs libcompanion_dep.so, which is not on the allowlist"

# Nothing to audit is a failure, not a pass.
mkdir -p "$work/empty"
expect_fail "$work/empty" "no ELF file"

# FILE needs libplugboard.so.0 with RUNPATH (two patchelf runs: 0.14 garbles the RUNPATH when one
# run does both).
needs_plugboard() {
  patchelf --add-needed libplugboard.so.0 "$1"
  patchelf --set-rpath "$2" "$1"
}

# libplugboard.so.0: allowed beside the file with RUNPATH $ORIGIN, or in ../lib with $ORIGIN/../lib.
mkdir -p "$work/nif/lib" "$work/tree/bin" "$work/tree/lib" "$work/stray"
for d in "$work/nif/lib" "$work/tree/lib"; do cp "$clean" "$d/libplugboard.so.0"; done
cp "$clean" "$work/nif/lib/nif.so"
needs_plugboard "$work/nif/lib/nif.so" '$ORIGIN'
cp "$clean" "$work/tree/bin/tool"
needs_plugboard "$work/tree/bin/tool" '$ORIGIN/../lib'
expect_pass "$work/nif" "$work/tree"
cp "$work/nif/lib/nif.so" "$work/stray/nif.so"  # the same RUNPATH, no library beside it
expect_fail "$work/stray" "^offence: $work/stray/nif.so needs libplugboard.so.0, which is neither beside it"
rm "$work/stray/nif.so"
cp "$clean" "$work/stray/libplugboard.so.0"
cp "$clean" "$work/stray/nif.so"
needs_plugboard "$work/stray/nif.so" /opt/plugboard/lib  # beside it, no $ORIGIN
expect_fail "$work/stray" "nif.so needs libplugboard.so.0" "RUNPATH: /opt/plugboard/lib"

# libcuda.so.1 only for the CUDA bridge.
mkdir -p "$work/cuda"
cp "$clean" "$work/cuda/libplugboard_cuda_bridge.so"
patchelf --add-needed libcuda.so.1 "$work/cuda/libplugboard_cuda_bridge.so"
expect_pass "$work/cuda"
cp "$work/cuda/libplugboard_cuda_bridge.so" "$work/cuda/libother.so"
expect_fail "$work/cuda" "^offence: $work/cuda/libother.so needs libcuda.so.1"

# A glibc version past the ceiling.
PLUGBOARD_GLIBC_CEILING=2.0 expect_fail "$work/clean" "^offence: $work/clean/libclean.so needs GLIBC_2\.[0-9.]*, newer than the ceiling GLIBC_2.0"

# An ELF file readelf cannot read (cut short: its section headers past its end) is an offence naming
# it, not a file audited with nothing needed.
mkdir -p "$work/cut"
head -c 200 "$clean" > "$work/cut/libcut.so"
expect_fail "$work/cut" "^offence: $work/cut/libcut.so: readelf -d cannot read it"

# RUNPATH and RPATH entries: $ORIGIN-relative ones pass; an absolute one (the build machine's) or an
# empty one (the working folder) is an offence naming the file and the entry, whatever the file needs.
mkdir -p "$work/rpath"
cp "$clean" "$work/rpath/libok.so"
patchelf --set-rpath '$ORIGIN:${ORIGIN}/../lib' "$work/rpath/libok.so"
expect_pass "$work/rpath"
cp "$clean" "$work/rpath/libabs.so"
patchelf --set-rpath /some/abs/path "$work/rpath/libabs.so"
out=$(expect_fail "$work/rpath" "^offence: $work/rpath/libabs.so has RUNPATH entry /some/abs/path, not relative to \$ORIGIN")
grep -q "libok.so" <<< "$(grep '^offence' <<< "$out")" && fail "libok.so's \$ORIGIN entries were refused:"$'\n'"$out"
rm "$work/rpath/libabs.so"
cp "$clean" "$work/rpath/libmixed.so"
patchelf --force-rpath --set-rpath '$ORIGIN/../lib:/home/builder/plugboard/build/src' "$work/rpath/libmixed.so"  # DT_RPATH
LC_ALL=C readelf -d "$work/rpath/libmixed.so" | grep -q '(RPATH)' || fail "patchelf --force-rpath wrote no RPATH"
expect_fail "$work/rpath" "^offence: $work/rpath/libmixed.so has RPATH entry /home/builder/plugboard/build/src, not relative"
rm "$work/rpath/libmixed.so"
cp "$clean" "$work/rpath/libempty.so"
patchelf --set-rpath '$ORIGIN:' "$work/rpath/libempty.so"
expect_fail "$work/rpath" "^offence: $work/rpath/libempty.so has an empty RUNPATH entry"

# libstdc++'s CXXABI_ and libgcc_s's GCC_ versions: reported, and checked against their ceilings
# (by default Debian 12's, which the build passes).
mkdir -p "$work/cxx"
cp "$cxx" "$work/cxx/libcxx.so"
patchelf --remove-rpath "$work/cxx/libcxx.so"
out=$(expect_pass "$work/cxx")
grep -q "^$work/cxx/libcxx.so: .*CXXABI_1\.3[0-9.]*, GCC_[0-9]" <<< "$out" || fail "no CXXABI_ and GCC_ versions in the file's line:"$'\n'"$out"
grep -q "^oldest libstdc++ this runs on: GLIBCXX_3\.4\.[0-9]* .*CXXABI_1\.3" <<< "$out" || fail "no CXXABI_ in the summary:"$'\n'"$out"
grep -q "^oldest libgcc_s this runs on: GCC_[0-9]" <<< "$out" || fail "no GCC_ summary:"$'\n'"$out"
PLUGBOARD_CXXABI_CEILING=1.2 expect_fail "$work/cxx" "^offence: $work/cxx/libcxx.so needs CXXABI_1\.3[0-9.]*, newer than the ceiling CXXABI_1.2"
PLUGBOARD_GCC_CEILING=2.0 expect_fail "$work/cxx" "^offence: $work/cxx/libcxx.so needs GCC_[0-9.]*, newer than the ceiling GCC_2.0"
PLUGBOARD_GLIBCXX_CEILING=3.4 expect_fail "$work/cxx" "^offence: $work/cxx/libcxx.so needs GLIBCXX_3\.4\.[0-9]*, newer than the ceiling GLIBCXX_3.4"
echo "audit test passed"
