// Host callbacks from C++; docs/host-callbacks.md shows the part between the two `guide` marks: a
// receiver with a blocking function (the program waits for its result) and an ordered one (the print
// hook: delivered in program order, the program does not wait), declared to the client before the
// program is compiled, and passed to the run. Built against the installed library and run by
// tests/cli_install_test.sh (ctest install.consumer), which checks what it prints.
//   host_callbacks examples/callbacks.mlir
#include <plugboard/plugboard.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace api = plugboard::api;
using plugboard::BlockingCall;
using plugboard::OrderedCall;
using plugboard::Status;
using plugboard::TensorView;

static int fail(const plugboard::Error& error) {
  std::fprintf(stderr, "%s\n", error.to_string().c_str());
  return 1;
}

// x's f32 elements times 10.
static std::vector<float> scaled(const TensorView& x) {
  std::vector<float> y(x.bytes.size() / sizeof(float));
  std::memcpy(y.data(), x.bytes.data(), x.bytes.size());
  for (float& v : y) v *= 10;
  return y;
}

// "label: f32[2,4] 1 2 3 ..." for a print hook's call.
static void log(const OrderedCall& call) {
  const auto* label = call.attribute("label");
  const auto& x = call.operands.at(0);
  std::vector<float> values(x.data.size() / sizeof(float));
  std::memcpy(values.data(), x.data.data(), x.data.size());
  std::printf("%s:", label ? std::get<std::string>(*label).c_str() : "?");
  for (float v : values) std::printf(" %g", v);
  std::printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: host_callbacks examples/callbacks.mlir\n"), 2;
  auto boot = api::boot();
  if (!boot || !boot->client) return fail(boot ? boot->status.error() : boot.error());
  const api::Client& client = *boot->client;
  auto program = api::Program::from_file(argv[1]);
  if (!program) return fail(program.error());
  const std::vector<float> input{1, 2, 3, 4, -1, 0, 1, 2};
  const int64_t dims[] = {2, 4};
  auto x = client.copy_to_device(std::as_bytes(std::span(input)), plugboard::DType::kF32, dims);
  if (!x) return fail(x.error());
  api::Buffer* args[] = {&*x};

  // [guide]
  auto receiver = api::HostCallbacks::create();
  if (!receiver) return fail(receiver.error());
  auto bound = receiver->add_blocking("host_scale", [](const BlockingCall& call) -> Status {
    const TensorView& x = call.operands()[0];               // dtype, dims, bytes
    std::vector<float> y = scaled(x);
    return call.set_result(0, TensorView{x.dtype, x.dims, std::as_bytes(std::span(y))});  // type-checked
  });
  if (bound) bound = receiver->add_ordered("plugboard.print", [](const OrderedCall& call) -> Status {
    log(call);                                              // owned copies, in program order
    return plugboard::ok();
  });
  if (bound) bound = client.declare_callbacks(*receiver);   // before compiling: registers the targets
  if (!bound) return fail(bound.error());
  auto exe = client.compile(*program);
  if (!exe) return fail(exe.error());
  auto run = exe->execute(args, {.callbacks = *receiver});
  if (!run) return fail(run.error());
  if (auto done = run->await(); !done) return fail(done.error());  // every ordered call delivered by then
  // [guide]

  auto out = run->outputs()[0].to_host();
  if (!out) return fail(out.error());
  std::vector<float> values(out->size() / sizeof(float));
  std::memcpy(values.data(), out->data(), out->size());
  std::printf("calls: %llu blocking, %llu ordered\nout0:", static_cast<unsigned long long>(run->blocking_calls()),
              static_cast<unsigned long long>(run->ordered_calls()));
  for (float v : values) std::printf(" %g", v);
  std::printf("\n");
  return 0;
}
