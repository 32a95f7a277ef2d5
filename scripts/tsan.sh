#!/usr/bin/env bash
# ThreadSanitizer run of plugboard's threaded code: the ordered-delivery queue and the shared
# delivery pool on their own, the embedding API (completions on delivery threads, compile_async, a
# thousand receivers, executions dropped unfinished from another thread), the
# callback tests that run one program from two threads with two receivers (on the real CPU plugins,
# which are not instrumented: TSan sees plugboard's side of every race, not the plugin's), concurrent
# fetches and bundle assemblies, the multi-host key-value store (many getters waiting on one put,
# concurrent puts, a kv_get callback woken from another thread), plugin loads racing a hanging
# PJRT_Plugin_Initialize, and the CLI's callback commands (their watcher thread, time limits and
# signal clean-up).
#
#   scripts/tsan.sh [BUILD_DIR]     (default build-tsan/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-tsan}
deps=${PLUGBOARD_DEPS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/plugboard/deps}
"$root/scripts/setup.sh" --no-build
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPLUGBOARD_DEPS_DIR="$deps" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
    -DPLUGBOARD_BENCH=OFF -DPLUGBOARD_CUDA_BRIDGE=OFF \
    -DCMAKE_C_FLAGS=-fsanitize=thread -DCMAKE_CXX_FLAGS=-fsanitize=thread \
    -DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread
fi
cmake --build "$build" --target ordered_delivery_test callback_test facade_test fetch_test plugin_test bundle_test compile_cache_test key_value_store_test trace_test inline_launch_judge_test plugboard \
  --parallel "$(nproc)"
export TSAN_OPTIONS="halt_on_error=1:ignore_noninstrumented_modules=1:second_deadlock_stack=1:suppressions=$root/tests/tsan.supp"
"$build/tests/ordered_delivery_test"
"$build/tests/callback_test" --gtest_filter='*TwoThreads*:*Ordered*:*DoesNotWait*:*Token*:*Reuse*:*NoDeliveryThread*:*EmptyContext*:*AssignedOver*:ContextPool.*'
"$build/tests/facade_test" --gtest_filter='-FacadeNoThrow.*'
"$build/tests/fetch_test" --gtest_filter='Concurrency.*'
"$build/tests/plugin_test" --gtest_filter='FaultPluginTest.HangingInitialize*:FaultPluginTest.ConcurrentLoads*'
"$build/tests/bundle_test" --gtest_filter='Assemble.Concurrent*'
"$build/tests/compile_cache_test" --gtest_filter='CompileCacheConcurrency.*'
"$build/tests/trace_test" --gtest_filter='TraceRecorderThreads.*:TraceOnPlugin.*'
"$build/tests/inline_launch_judge_test" --gtest_filter='*Concurrent*'
"$build/tests/key_value_store_test" --gtest_filter='*Threads.*:KvCallbacks.GetWaitsForAPutFromAnotherThread:InMemoryKeyValueStore.GetWaiting*'
files="$deps/files"
"$root/tests/cli_callbacks_test.sh" "$build/tools/plugboard/plugboard" "$root/examples" "$build/cli_callbacks_work" \
  "$files/xla_cpu_081/xla_cpu_pjrt.so" "$files/xla_cpu_106/libpjrt_cpu.so" "$files/xla_cpu_115/pjrt_c_api_cpu_plugin.so"
echo "[tsan] no data race reported"
