// Host callbacks from inside a program (scripts/demo.sh runs it; see docs/host-callbacks.md):
//  - @plugboard.print is the print hook: an ordered call, the program does not wait for it; the
//    label comes from backend_config.
//  - @host_scale is a blocking call: the program waits for its result. `plugboard run` binds it with
//    --callback host_scale=COMMAND.
// The token threaded through the calls fixes their order (XLA may run independent side effects in
// any order); tokens are not passed to the host.
module @callbacks attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    // [guide]
    %t0 = stablehlo.after_all : !stablehlo.token
    %t1 = stablehlo.custom_call @plugboard.print(%t0, %x) {api_version = 4 : i32, has_side_effect = true,
        backend_config = {label = "x"}} : (!stablehlo.token, tensor<2x4xf32>) -> !stablehlo.token          // ordered
    %t2, %scaled = stablehlo.custom_call @host_scale(%t1, %x) {api_version = 4 : i32, has_side_effect = true}
        : (!stablehlo.token, tensor<2x4xf32>) -> (!stablehlo.token, tensor<2x4xf32>)                      // blocking
    // [guide]
    %t3 = stablehlo.custom_call @plugboard.print(%t2, %scaled) {api_version = 4 : i32, has_side_effect = true, backend_config = {label = "host_scale(x)"}} : (!stablehlo.token, tensor<2x4xf32>) -> !stablehlo.token
    %out = stablehlo.add %scaled, %x : tensor<2x4xf32>
    return %out : tensor<2x4xf32>
  }
}
