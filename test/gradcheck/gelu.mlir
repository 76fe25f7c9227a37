// Finite-difference check of the VJP of weft.gelu (tanh approximation) (f64, every parameter).
// RUN: weft-compile %s -o %t.weft --quiet
// RUN: weft-run %t.weft --grad-check 12 | FileCheck %s
// CHECK: grad-check: passed
func.func @gelu(%tokens: tensor<2x5xi32>, %targets: tensor<2x5xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.5} : tensor<11x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<11x8xf64>, tensor<2x5xi32>) -> tensor<2x5x8xf64>
  %y = weft.gelu %x : tensor<2x5x8xf64>
  %head = weft.param "head" {init = "normal", std = 0.5} : tensor<8x11xf64>
  %logits = weft.matmul %y, %head : (tensor<2x5x8xf64>, tensor<8x11xf64>) -> tensor<2x5x11xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x5x11xf64>, tensor<2x5xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
