// The README's C++ start, whole: boot the target this machine has, compile a StableHLO program from a
// file, run it on a f32[2,4] and print its first output. Built against the installed library and run
// by tests/cli_install_test.sh (ctest install.consumer); the README's block is the part between the
// two `readme` marks, and tests/docs_examples_test.py (ctest docs.readme_starts) checks that the two agree.
//   quickstart examples/softmax.mlir
#include <plugboard/plugboard.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

namespace api = plugboard::api;

static int fail(const plugboard::Error& error) {
  std::fprintf(stderr, "%s\n", error.to_string().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: quickstart PROGRAM.mlir (one f32[2,4] parameter)\n"), 2;
  const std::vector<float> input{1, 2, 3, 4, 5, 6, 7, 8};
  const int64_t dims[] = {2, 4};
  // [readme]
  auto boot = api::boot();                                  // PLUGBOARD_TARGET(S), priorities; boot->report says why
  if (!boot || !boot->client) return fail(boot ? boot->status.error() : boot.error());
  const api::Client& client = *boot->client;
  auto program = api::Program::from_file(argv[1]);          // StableHLO: MLIR text or bytecode
  if (!program) return fail(program.error());               // errors are values: nothing throws
  auto exe = client.compile(*program);
  if (!exe) return fail(exe.error());
  auto x = client.copy_to_device(std::as_bytes(std::span(input)), plugboard::DType::kF32, dims);
  if (!x) return fail(x.error());
  api::Buffer* args[] = {&*x};
  auto run = exe->execute(args);                            // run->on_complete(fn) instead: no thread waits
  if (!run) return fail(run.error());
  if (auto done = run->await(); !done) return fail(done.error());
  auto out = run->outputs()[0].to_host();                   // the bytes of the first output
  // [readme]
  if (!out) return fail(out.error());
  std::vector<float> values(out->size() / sizeof(float));
  std::memcpy(values.data(), out->data(), values.size() * sizeof(float));
  std::printf("%s:", client.platform().c_str());
  for (float v : values) std::printf(" %.6g", v);
  std::printf("\n");
  return 0;
}
