#!/usr/bin/env bash
# What the native code plugboard ships needs at run time, checked against what every glibc Linux has.
#
#   scripts/audit_native.sh DIR...
#
# Every ELF file under the folders (found by its magic, whatever its name; symbolic links are not
# followed) is read with readelf (a file readelf cannot read is an offence, never a file with nothing
# to say): its NEEDED libraries must be on the allowlist below, every RUNPATH or RPATH entry must be
# relative to the file ($ORIGIN...: an absolute path is the build machine's, an empty one the working
# folder), and the symbol versions it needs from glibc (GLIBC_x.y), libstdc++ (GLIBCXX_x.y.z and
# CXXABI_x.y.z) and libgcc_s (GCC_x.y.z) must be no newer than the ceilings:
#
#   PLUGBOARD_GLIBC_CEILING    (default 2.34: the oldest glibc plugboard promises to run on)
#   PLUGBOARD_GLIBCXX_CEILING  (default 3.4.30: Debian 12's libstdc++)
#   PLUGBOARD_CXXABI_CEILING   (default 1.3.13: Debian 12's libstdc++)
#   PLUGBOARD_GCC_CEILING      (default 12.0.0: Debian 12's libgcc_s)
#
# The allowlist: the loader and glibc's own libraries (linux-vdso, ld-linux-x86-64.so.2, libc.so.6,
# libm.so.6, libdl.so.2, libpthread.so.0, librt.so.1), the C++ runtime (libstdc++.so.6,
# libgcc_s.so.1) and zlib (libz.so.1). Two more, each in one place only:
#   - libplugboard.so.0, for a file that finds it beside itself or in ../lib through its RUNPATH
#     ($ORIGIN, or $ORIGIN/../lib), where the library is: the NIF, an embedder shipped with it;
#   - libcuda.so.1, the GPU host's driver, for files named libplugboard_cuda_bridge.so only (the CUDA
#     callback bridge, whose CUDA runtime is linked statically; today it does not even need the
#     driver by name: the static runtime opens it at run time).
#
# One line per file (its NEEDED libraries, its RUNPATH and the newest versions it needs), one line per
# offence ("offence: FILE needs LIB ..."), then "oldest glibc this runs on: X" and the newest
# libstdc++ and libgcc_s versions needed. Exit status 1 when there is any offence or no ELF file at
# all, 2 on a usage error.
set -uo pipefail

glibc_ceiling=${PLUGBOARD_GLIBC_CEILING:-2.34}
glibcxx_ceiling=${PLUGBOARD_GLIBCXX_CEILING:-3.4.30}
cxxabi_ceiling=${PLUGBOARD_CXXABI_CEILING:-1.3.13}
gcc_ceiling=${PLUGBOARD_GCC_CEILING:-12.0.0}
allowed=(linux-vdso.so.1 linux-vdso64.so.1 ld-linux-x86-64.so.2 libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0
         librt.so.1 libstdc++.so.6 libgcc_s.so.1 libz.so.1)

if [ $# -eq 0 ]; then
  echo "usage: $0 DIR..." >&2
  exit 2
fi
for dir in "$@"; do
  [ -d "$dir" ] || { echo "$0: $dir is not a folder" >&2; exit 2; }
done
command -v readelf > /dev/null || { echo "$0: readelf (binutils) is needed" >&2; exit 2; }

# The newer of two versions (dotted numbers), and whether $1 is newer than $2.
newer() { printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1; }
is_newer() { [ "$1" != "$2" ] && [ "$(newer "$1" "$2")" = "$1" ]; }

offences=0
files=0
# The symbol version families checked, each with its ceiling; the newest each file needs and the
# newest of all (with the file that needs it).
families=(GLIBC GLIBCXX CXXABI GCC)
declare -A ceiling=([GLIBC]=$glibc_ceiling [GLIBCXX]=$glibcxx_ceiling [CXXABI]=$cxxabi_ceiling [GCC]=$gcc_ceiling)
declare -A newest=() newest_file=()
readelf_errors=$(mktemp) || exit 2
trap 'rm -f "$readelf_errors"' EXIT
offence() {
  echo "offence: $*"
  offences=$((offences + 1))
}

# True when the file at $1 starts with the ELF magic.
is_elf() {
  local magic=""
  LC_ALL=C IFS= read -r -n 4 -d '' magic < "$1" 2> /dev/null
  [ "$magic" = $'\x7fELF' ]
}

# read_elf VAR FILE OPTION...: sets VAR to readelf's output; when readelf fails, an offence naming
# FILE and readelf's first error, and false: a file it cannot read must not count as audited, with
# nothing needed.
read_elf() {
  local -n read_elf_out=$1
  local file=$2 rc=0
  shift 2
  # shellcheck disable=SC2034  # a nameref: it sets the caller's variable
  read_elf_out=$(LC_ALL=C readelf "$@" --wide "$file" 2> "$readelf_errors") || rc=$?
  if [ "$rc" -ne 0 ] || grep -q 'Error' "$readelf_errors"; then
    offence "$file: readelf $* cannot read it (exit $rc): $(grep -m 1 . "$readelf_errors" || echo 'no message')"
    return 1
  fi
}

audit_file() {
  local file=$1 dir name dynamic needed lib runpaths runpath entry entries versions family version summary
  dir=$(dirname "$file")
  name=$(basename "$file")
  read_elf dynamic "$file" -d || return 0
  # The versions it needs (the version-needs section, not the versions it defines).
  read_elf versions "$file" -V || return 0
  versions=$(sed -n '/^Version needs section/,/^Version \(definition\|symbols\) section/p' <<< "$versions" |
             grep -o 'Name: \(GLIBC\|GLIBCXX\|CXXABI\|GCC\)_[0-9][0-9.]*' | sed 's/^Name: //')
  needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<< "$dynamic")
  # "RUNPATH VALUE" and "RPATH VALUE" lines; the first value is the search path.
  runpaths=$(sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\1 \2/p' <<< "$dynamic")
  runpath=$(head -n 1 <<< "$runpaths" | cut -d ' ' -f 2-)
  declare -A need=()
  summary=""
  for family in "${families[@]}"; do
    need[$family]=$(grep "^${family}_" <<< "$versions" | sed "s/^${family}_//" | sort -V | tail -n 1)
    summary+=", ${family}_${need[$family]:-none}"
  done
  echo "$file: NEEDED $(echo $needed); $(echo ${runpaths:-RUNPATH none}); newest ${summary#, }"

  # Every RUNPATH and RPATH entry relative to the file: an absolute one is a folder of the machine
  # that built it (the library may be found there, or a stranger's in its place), an empty one the
  # working folder.
  local tag value
  while read -r tag value; do
    [ -n "$tag" ] || continue
    IFS=: read -r -a entries <<< "$value:"
    for entry in "${entries[@]}"; do
      case "$entry" in
        '$ORIGIN' | '$ORIGIN/'* | '${ORIGIN}' | '${ORIGIN}/'*) ;;
        '') offence "$file has an empty $tag entry (the working folder) in '$value': only \$ORIGIN-relative entries may ship" ;;
        *) offence "$file has $tag entry $entry, not relative to \$ORIGIN (a path of the machine that built it)" ;;
      esac
    done
  done <<< "$runpaths"

  for lib in $needed; do
    case " ${allowed[*]} " in *" $lib "*) continue ;; esac
    case "$lib" in
      libplugboard.so.0)
        # Beside the file with $ORIGIN in its RUNPATH, or in ../lib with $ORIGIN/../lib.
        local found=""
        IFS=: read -r -a entries <<< "$runpath"
        for entry in "${entries[@]}"; do
          entry=${entry//\$\{ORIGIN\}/\$ORIGIN}
          entry=${entry%/}
          if { [ "$entry" = '$ORIGIN' ] || [ "$entry" = '$ORIGIN/.' ]; } && [ -e "$dir/$lib" ]; then found=yes; fi
          if [ "$entry" = '$ORIGIN/../lib' ] && [ -e "$dir/../lib/$lib" ]; then found=yes; fi
        done
        [ -n "$found" ] && continue
        offence "$file needs $lib, which is neither beside it nor in ../lib with a RUNPATH (\$ORIGIN or" \
                "\$ORIGIN/../lib) that finds it there (RUNPATH: ${runpath:-none})"
        ;;
      libcuda.so.1)
        [ "$name" = libplugboard_cuda_bridge.so ] && continue
        offence "$file needs $lib, the GPU driver, which only libplugboard_cuda_bridge.so may need"
        ;;
      *)
        offence "$file needs $lib, which is not on the allowlist (glibc, libstdc++, libgcc_s, libz)"
        ;;
    esac
  done

  for family in "${families[@]}"; do
    version=${need[$family]}
    [ -n "$version" ] || continue
    if is_newer "$version" "${ceiling[$family]}"; then
      offence "$file needs ${family}_$version, newer than the ceiling ${family}_${ceiling[$family]}"
    fi
    if [ -z "${newest[$family]:-}" ] || is_newer "$version" "${newest[$family]}"; then
      newest[$family]=$version newest_file[$family]=$file
    fi
  done
}

while IFS= read -r -d '' file; do
  is_elf "$file" || continue
  files=$((files + 1))
  audit_file "$file"
done < <(find "$@" -type f -print0 | sort -z)

if [ "$files" -eq 0 ]; then
  echo "offence: no ELF file under $*: nothing was audited"
  exit 1
fi
echo "audited $files ELF file(s) under $*: $offences offence(s)"
echo "oldest glibc this runs on: ${newest[GLIBC]:-any} (GLIBC_${newest[GLIBC]:-none}, needed by" \
     "${newest_file[GLIBC]:-nothing}; ceiling $glibc_ceiling)"
echo "oldest libstdc++ this runs on: GLIBCXX_${newest[GLIBCXX]:-none} (needed by ${newest_file[GLIBCXX]:-nothing};" \
     "ceiling $glibcxx_ceiling), CXXABI_${newest[CXXABI]:-none} (needed by ${newest_file[CXXABI]:-nothing};" \
     "ceiling $cxxabi_ceiling)"
echo "oldest libgcc_s this runs on: GCC_${newest[GCC]:-none} (needed by ${newest_file[GCC]:-nothing};" \
     "ceiling $gcc_ceiling)"
[ "$offences" -eq 0 ]
