// A small dense layer with a ReLU, y = max(x·w + b, 0): compiled into the compute release's bundle
// (plugboard: [precompile: [...]] in the umbrella's mix.exs), so the release's first request runs it
// without compiling.
module @model {
  func.func public @main(%x: tensor<2x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<2x3xf32>
    %2 = stablehlo.add %0, %1 : tensor<2x3xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<2x3xf32>
    %3 = stablehlo.maximum %2, %zero : tensor<2x3xf32>
    return %3 : tensor<2x3xf32>
  }
}
