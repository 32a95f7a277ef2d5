// A tour of the C++ library; docs/cpp-library.md shows the part between the two `guide` marks: what a
// boot would consider, the boot, the devices, a compile on a compile thread and one waited for, a copy
// and a zero-copy view of the caller's memory, a donation the library refuses, and a run whose
// completion a delivery thread reports. Built against the installed library and run by
// tests/cli_install_test.sh (ctest install.consumer), which checks what it prints.
//   library_tour examples/softmax.mlir
#include <plugboard/plugboard.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <span>
#include <vector>

namespace api = plugboard::api;

static int fail(const plugboard::Error& error) {
  std::fprintf(stderr, "%s\n", error.to_string().c_str());
  return 1;
}

// The first output of `run` as floats (it is f32).
static plugboard::Expected<std::vector<float>> floats(api::Execution& run) {
  auto bytes = run.outputs()[0].to_host();
  if (!bytes) return std::unexpected(bytes.error());
  std::vector<float> values(bytes->size() / sizeof(float));
  std::memcpy(values.data(), bytes->data(), values.size() * sizeof(float));
  return values;
}

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: library_tour PROGRAM.mlir (one f32[2,4] parameter)\n"), 2;
  const std::vector<float> input{1, 2, 3, 4, 5, 6, 7, 8};
  const auto bytes = std::as_bytes(std::span(input));
  const int64_t dims[] = {2, 4};
  // Memory a view borrows (the shared_ptr keeps it alive): 64-byte aligned, so that the CPU plugin
  // reads it in place; unaligned memory is copied, and the copy is the device's to give up.
  struct alignas(64) Aligned {
    float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  };
  auto owner = std::make_shared<const Aligned>();
  const auto binary_bytes = std::as_bytes(std::span(owner->values));
  // [guide]
  auto seen = api::discover();                              // candidates + probe results, nothing loaded
  if (!seen) return fail(seen.error());
  auto boot = api::boot();                                  // PLUGBOARD_TARGET(S), priorities; boot->report says why
  if (!boot || !boot->client) return fail(boot ? boot->status.error() : boot.error());
  const api::Client& client = *boot->client;                // or api::Client::open("plugin.so", {{"cpu_device_count", int64_t{4}}})
  for (const api::Device& d : client.devices())             // index, id, kind, memory figures where reported
    std::printf("device %d: %s\n", d.index, d.kind.c_str());
  auto program = api::Program::from_file(argv[1]);          // MLIR text or bytecode
  if (!program) return fail(program.error());
  std::promise<plugboard::Expected<api::Executable>> compiled;
  auto started = client.compile_async(*program, {}, [&](plugboard::Expected<api::Executable> exe) {
    compiled.set_value(std::move(exe));                     // on a compile thread
  });
  if (!started) return fail(started.error());
  auto exe = client.compile(*program, {.portable = true});  // portable: runs on any device
  if (!exe) return fail(exe.error());
  auto x = client.copy_to_device(bytes, plugboard::DType::kF32, dims);
  auto view = client.adopt(binary_bytes, owner, api::HostMemory::kImmutable, plugboard::DType::kF32, dims);
  if (!x || !view) return fail(!x ? x.error() : view.error());
  api::Buffer* args[] = {&*view};                           // the copy x runs the same way (below)
  auto refused = exe->execute(args, {.device = 0, .donate = {0}});  // an immutable view cannot be donated
  auto run = exe->execute(args, {.device = 0});
  if (!run) return fail(run.error());
  std::promise<plugboard::Status> completed;
  auto watched = run->on_complete([&](plugboard::Status s) { completed.set_value(s); });  // no thread waits
  if (!watched) return fail(watched.error());
  // [guide]

  std::printf("discovered %zu candidate(s); booted %s\n", seen->candidates.size(), client.platform().c_str());
  if (refused) return std::fprintf(stderr, "the donation of an immutable view was not refused\n"), 1;
  std::printf("donation refused: %s\n", refused.error().to_string().c_str());
  if (auto done = completed.get_future().get(); !done) return fail(done.error());
  auto from_view = floats(*run);
  if (!from_view) return fail(from_view.error());

  auto other = compiled.get_future().get();  // the compile thread's executable, run on the copy
  if (!other) return fail(other.error());
  api::Buffer* copied[] = {&*x};
  auto second = other->execute(copied);
  if (!second) return fail(second.error());
  if (auto done = second->await(); !done) return fail(done.error());
  auto from_copy = floats(*second);
  if (!from_copy) return fail(from_copy.error());
  if (*from_view != *from_copy) return std::fprintf(stderr, "the view and the copy gave different outputs\n"), 1;
  std::printf("out0:");
  for (float v : *from_view) std::printf(" %.6g", v);
  std::printf("\n");
  return 0;
}
