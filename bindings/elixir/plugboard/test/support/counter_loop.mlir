func.func public @main(%n: tensor<i64>, %seed: tensor<i64>) -> tensor<i64> {
  %c0 = stablehlo.constant dense<0> : tensor<i64>
  %c1 = stablehlo.constant dense<1> : tensor<i64>
  %m = stablehlo.constant dense<6364136223846793005> : tensor<i64>
  %r:2 = stablehlo.while(%i = %c0, %acc = %seed) : tensor<i64>, tensor<i64>
    cond {
      %lt = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %i2 = stablehlo.add %i, %c1 : tensor<i64>
      %a1 = stablehlo.multiply %acc, %m : tensor<i64>
      %a2 = stablehlo.add %a1, %i : tensor<i64>
      stablehlo.return %i2, %a2 : tensor<i64>, tensor<i64>
    }
  return %r#1 : tensor<i64>
}
