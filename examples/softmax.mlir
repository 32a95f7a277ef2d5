// Row-wise softmax of a f32[2,4] and each row's maximum: a StableHLO program written by hand.
//   plugboard run examples/softmax.mlir --plugin PLUGIN.so -i examples/x.npy
module @softmax attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2xf32>) {
    %neg_inf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %max = stablehlo.reduce(%x init: %neg_inf) applies stablehlo.maximum across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %max_b = stablehlo.broadcast_in_dim %max, dims = [0] : (tensor<2xf32>) -> tensor<2x4xf32>
    %shifted = stablehlo.subtract %x, %max_b : tensor<2x4xf32>
    %e = stablehlo.exponential %shifted : tensor<2x4xf32>
    %zero = stablehlo.constant dense<0.0> : tensor<f32>
    %sum = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<2x4xf32>, tensor<f32>) -> tensor<2xf32>
    %sum_b = stablehlo.broadcast_in_dim %sum, dims = [0] : (tensor<2xf32>) -> tensor<2x4xf32>
    %y = stablehlo.divide %e, %sum_b : tensor<2x4xf32>
    return %y, %max : tensor<2x4xf32>, tensor<2xf32>
  }
}
