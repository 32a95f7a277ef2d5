#!/usr/bin/env bash
# What the native code plugboard ships needs at run time, checked against what every glibc Linux has.
#
#   scripts/audit_native.sh DIR...
#
# Every ELF file under the folders (found by its magic, whatever its name; symbolic links are not
# followed) is read with readelf: its NEEDED libraries must be on the allowlist below, and the symbol
# versions it needs from glibc (GLIBC_x.y) and libstdc++ (GLIBCXX_x.y.z) must be no newer than the
# ceilings, by default what Debian 12 (bookworm) provides:
#
#   PLUGBOARD_GLIBC_CEILING    (default 2.36)
#   PLUGBOARD_GLIBCXX_CEILING  (default 3.4.30)
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
# One line per file (its NEEDED libraries and the newest versions it needs), one line per offence
# ("offence: FILE needs LIB ..."), then "oldest glibc this runs on: X". Exit status 1 when there is
# any offence or no ELF file at all, 2 on a usage error.
set -uo pipefail

glibc_ceiling=${PLUGBOARD_GLIBC_CEILING:-2.36}
glibcxx_ceiling=${PLUGBOARD_GLIBCXX_CEILING:-3.4.30}
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
newest_glibc="" newest_glibc_file=""
newest_glibcxx="" newest_glibcxx_file=""
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

audit_file() {
  local file=$1 dir name dynamic needed lib runpath entry entries versions glibc glibcxx
  dir=$(dirname "$file")
  name=$(basename "$file")
  dynamic=$(LC_ALL=C readelf -d --wide "$file" 2> /dev/null)
  needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<< "$dynamic")
  runpath=$(sed -n 's/.*(\(RUNPATH\|RPATH\)).*\[\(.*\)\]/\2/p' <<< "$dynamic" | head -n 1)
  # The versions it needs (the version-needs section, not the versions it defines).
  versions=$(LC_ALL=C readelf -V --wide "$file" 2> /dev/null |
             sed -n '/^Version needs section/,/^Version \(definition\|symbols\) section/p' |
             grep -o 'Name: GLIBC\(XX\)\?_[0-9][0-9.]*' | sed 's/^Name: //')
  glibc=$(grep '^GLIBC_' <<< "$versions" | sed 's/^GLIBC_//' | sort -V | tail -n 1)
  glibcxx=$(grep '^GLIBCXX_' <<< "$versions" | sed 's/^GLIBCXX_//' | sort -V | tail -n 1)
  echo "$file: NEEDED $(echo $needed); newest GLIBC_${glibc:-none}, GLIBCXX_${glibcxx:-none}"
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

  if [ -n "$glibc" ]; then
    if is_newer "$glibc" "$glibc_ceiling"; then
      offence "$file needs GLIBC_$glibc, newer than the ceiling GLIBC_$glibc_ceiling"
    fi
    if [ -z "$newest_glibc" ] || is_newer "$glibc" "$newest_glibc"; then newest_glibc=$glibc newest_glibc_file=$file; fi
  fi
  if [ -n "$glibcxx" ]; then
    if is_newer "$glibcxx" "$glibcxx_ceiling"; then
      offence "$file needs GLIBCXX_$glibcxx, newer than the ceiling GLIBCXX_$glibcxx_ceiling"
    fi
    if [ -z "$newest_glibcxx" ] || is_newer "$glibcxx" "$newest_glibcxx"; then
      newest_glibcxx=$glibcxx newest_glibcxx_file=$file
    fi
  fi
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
echo "oldest glibc this runs on: ${newest_glibc:-any} (GLIBC_${newest_glibc:-none}, needed by ${newest_glibc_file:-nothing};" \
     "ceiling $glibc_ceiling)"
echo "oldest libstdc++ this runs on: GLIBCXX_${newest_glibcxx:-none} (needed by ${newest_glibcxx_file:-nothing};" \
     "ceiling $glibcxx_ceiling)"
[ "$offences" -eq 0 ]
