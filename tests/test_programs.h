// StableHLO programs that more than one test binary runs.
#pragma once

namespace plugboard::testing {

// A 256x256 f32 matmul of its argument by itself: enough work that XLA's CPU client completes it
// after the launch returns (asynchronously), not inside PJRT_LoadedExecutable_Execute.
inline constexpr char kMatmul256[] = R"mlir(
module @matmul_256 attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<256x256xf32>) -> tensor<256x256xf32> {
    %0 = stablehlo.dot_general %a, %a, contracting_dims = [1] x [0] : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
    return %0 : tensor<256x256xf32>
  }
}
)mlir";

}  // namespace plugboard::testing
