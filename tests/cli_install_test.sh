#!/usr/bin/env bash
# The installed tree, as a user gets it from `cmake --install BUILD --prefix P`: a consumer program
# built against it with find_package(plugboard) and with pkg-config runs on the CPU plugin (booting
# with isolation, so the helper must be found from the installed library); the installed library
# links no CUDA (or ROCm) library; the installed CLI runs from a moved copy of the tree and finds
# its isolation helper beside itself (never the build tree's).
#
#   cli_install_test.sh BUILD_DIR CONSUMER_SOURCE_DIR PLUGIN.so
set -euo pipefail
build=$1 consumer=$2 plugin=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" || { cat "$work/install.log"; fail "cmake --install"; }
for f in bin/plugboard bin/plugboard-isolate include/plugboard/plugboard.h lib/cmake/plugboard/plugboardConfig.cmake \
         lib/pkgconfig/plugboard.pc; do
  [ -e "$work/prefix/$f" ] || fail "the install has no $f"
done
lib=$(find "$work/prefix/lib" -maxdepth 1 -name 'libplugboard.so.*' -type f | head -n 1)
[ -n "$lib" ] || fail "no libplugboard.so in the install"

# The installed library links no vendor runtime.
if readelf -d "$lib" | grep NEEDED | grep -Ei 'cuda|cudart|nvidia|nvrtc|rocm|hip|amdhip'; then
  fail "libplugboard.so links a vendor library"
fi
# It exports the facade, the public value types' functions and the trace API (plugboard/trace.h), nothing of the layers: every exported
# plugboard:: name is one of src/embed/exports.map's, and nothing of protobuf is exported.
exported=$(nm -D --defined-only "$lib" | c++filt | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }')
grep -q '^plugboard::api::boot' <<< "$exported" || fail "plugboard::api::boot is not exported"
public='^plugboard::(api::|trace::|Error::|code_name|dtype_|all_dtypes|element_count|byte_size|shape_string|attribute_to_string|valid_callback_name|TensorView::|MutableTensorView::|BlockingCall::|OrderedCall::)'
internal=$(echo "$exported" | grep '^plugboard::' | grep -Ev "$public" | head -5 || true)
[ -z "$internal" ] || fail "libplugboard.so exports internal symbols: $internal"
if grep -q '^google::protobuf' <<< "$exported"; then fail "libplugboard.so exports protobuf"; fi

# Moved after installing: nothing may point back at the build tree or the first prefix.
mv "$work/prefix" "$work/moved"
prefix=$work/moved
export PJRT_NAMES_AND_LIBRARY_PATHS="cpu:$plugin"

cmake -S "$consumer" -B "$work/cmake-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; fail "configuring the consumer with find_package(plugboard)"; }
cmake --build "$work/cmake-build" > "$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the consumer"; }
out=$("$work/cmake-build/consumer") || fail "the CMake consumer failed: $out"
echo "cmake consumer: $out"
case "$out" in *"on cpu (isolated: yes): 11 22 33 44"*) ;; *) fail "unexpected output: $out" ;; esac
# The README's C++ start: the softmax example's first output (row 1 of softmax([1 2 3 4; 5 6 7 8])).
out=$("$work/cmake-build/quickstart" "$(dirname "$0")/../examples/softmax.mlir") || fail "the README's quickstart failed: $out"
echo "quickstart: $out"
case "$out" in "cpu: 0.0320586 0.0871443 0.236883 0.643914 0.0320586 0.0871443 0.236883 0.643914") ;; *) fail "unexpected quickstart output: $out" ;; esac
# The C++ guide's tour (docs/cpp-library.md): the same softmax through a view and through a copy, the
# donation of the view refused.
examples=$(dirname "$0")/../examples
out=$("$work/cmake-build/library_tour" "$examples/softmax.mlir") || fail "the C++ guide's tour failed: $out"
echo "library_tour: $out"
for want in "device 0: cpu" "booted cpu" "donation refused: " "out0: 0.0320586 0.0871443 0.236883 0.643914 0.0320586 0.0871443 0.236883 0.643914"; do
  grep -qF -- "$want" <<< "$out" || fail "the tour printed no '$want'"
done
# The host callbacks guide's C++ example (docs/host-callbacks.md): x printed, scaled by the blocking
# callback, the scaled array printed, x added.
out=$("$work/cmake-build/host_callbacks" "$examples/callbacks.mlir") || fail "the host callbacks example failed: $out"
echo "host_callbacks: $out"
want="x: 1 2 3 4 -1 0 1 2
host_scale(x): 10 20 30 40 -10 0 10 20
calls: 1 blocking, 2 ordered
out0: 11 22 33 44 -11 0 11 22"
[ "$out" = "$want" ] || fail "the host callbacks example printed:
$out
expected:
$want"

flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs plugboard) || fail "pkg-config plugboard"
c++ -o "$work/pc-consumer" "$consumer/main.cpp" $flags -Wl,-rpath,"$prefix/lib" || fail "building with pkg-config ($flags)"
out=$("$work/pc-consumer") || fail "the pkg-config consumer failed: $out"
echo "pkg-config consumer: $out"
case "$out" in *"11 22 33 44"*) ;; *) fail "unexpected output: $out" ;; esac

"$prefix/bin/plugboard" version > /dev/null || fail "the installed CLI does not run"
# doctor loads every candidate in the isolation helper: it must be the installed one.
report=$("$prefix/bin/plugboard" doctor --json) || fail "the installed doctor failed: $report"
grep -q '"isolated": *true' <<< "$report" || fail "doctor did not isolate: $report"
grep -q '"verdict": *"chosen"' <<< "$report" || fail "doctor chose nothing: $report"
echo "install test passed"
