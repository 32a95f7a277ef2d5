// An application of the installed library: boot (with the load tried in the isolation helper first,
// found beside the installed library), compile an add, run it, print the sum. Includes the facade
// only. Exit 0 on the right answer.
#include <plugboard/plugboard.h>

#include <cstdio>
#include <vector>

int main() {
  namespace api = plugboard::api;
  api::SelectionSettings settings;
  settings.isolate = true;
  auto boot = api::boot(settings);
  if (!boot) return std::fprintf(stderr, "boot: %s\n", boot.error().to_string().c_str()), 1;
  if (!boot->client) return std::fprintf(stderr, "%s\n%s\n", boot->status.error().to_string().c_str(), boot->report.text.c_str()), 1;
  const auto& client = *boot->client;
  auto program = api::Program::from_bytes(R"mlir(
module @add attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = stablehlo.add %a, %b : tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
)mlir", "add.mlir");
  if (!program) return std::fprintf(stderr, "%s\n", program.error().to_string().c_str()), 1;
  auto exe = client.compile(*program);
  if (!exe) return std::fprintf(stderr, "%s\n", exe.error().to_string().c_str()), 1;
  // Where the executable came from (the compile cache's report): exported by the library too.
  std::printf("executable: %s (%s)\n", exe->compile_report().to_string().c_str(), exe->compile_report().source_id());
  const std::vector<float> a{1, 2, 3, 4}, b{10, 20, 30, 40};
  const int64_t dims[] = {4};
  auto x = client.copy_to_device(std::as_bytes(std::span(a)), plugboard::DType::kF32, dims);
  auto y = client.copy_to_device(std::as_bytes(std::span(b)), plugboard::DType::kF32, dims);
  if (!x || !y) return std::fprintf(stderr, "copy failed\n"), 1;
  api::Buffer* args[] = {&*x, &*y};
  auto run = exe->execute(args);
  if (!run) return std::fprintf(stderr, "%s\n", run.error().to_string().c_str()), 1;
  if (auto st = run->await(); !st) return std::fprintf(stderr, "%s\n", st.error().to_string().c_str()), 1;
  std::vector<float> out(4);
  if (!run->outputs()[0].to_host(std::as_writable_bytes(std::span(out)))) return 1;
  const auto& chosen = boot->report.candidates[*boot->report.chosen];
  std::printf("plugboard %s on %s (isolated: %s): %g %g %g %g\n", api::version(), client.platform().c_str(),
              chosen.isolated ? "yes" : "no", out[0], out[1], out[2], out[3]);
  return out == std::vector<float>{11, 22, 33, 44} ? 0 : 1;
}
