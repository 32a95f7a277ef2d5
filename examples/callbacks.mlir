// Host callbacks from inside a program (run with scripts/demo.sh, or see README "Host callbacks"):
//  - @plugboard.print is the print hook: an ordered call, the program does not wait for it; the
//    label comes from backend_config.
//  - @host_scale is a blocking call: the program waits for its result. `plugboard run` binds it with
//    --callback host_scale=COMMAND.
module @callbacks attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    stablehlo.custom_call @plugboard.print(%x) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "x"}} : (tensor<2x4xf32>) -> ()
    %scaled = stablehlo.custom_call @host_scale(%x) {api_version = 4 : i32} : (tensor<2x4xf32>) -> tensor<2x4xf32>
    stablehlo.custom_call @plugboard.print(%scaled) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "host_scale(x)"}} : (tensor<2x4xf32>) -> ()
    %out = stablehlo.add %scaled, %x : tensor<2x4xf32>
    return %out : tensor<2x4xf32>
  }
}
