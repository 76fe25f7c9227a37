// Finite-difference check of the VJP of weft.act, one function per ACT2FN
// activation weft implements by name (f64, every parameter). Kinked ones
// (relu, relu6, leaky_relu) avoid their kinks with probability 1.
// RUN: bash -c 'for kind in gelu gelu_fast quick_gelu relu relu2 relu6 leaky_relu silu sigmoid tanh linear laplace mish; do \
// RUN:   sed "s/KIND/$kind/" %s > %t.$kind.mlir && weft-compile %t.$kind.mlir -o %t.$kind.weft --quiet && \
// RUN:   echo "$kind: $(weft-run %t.$kind.weft --grad-check 12 | tail -1)"; done' | FileCheck %s
// CHECK: gelu: grad-check: passed
// CHECK: gelu_fast: grad-check: passed
// CHECK: quick_gelu: grad-check: passed
// CHECK: relu: grad-check: passed
// CHECK: relu2: grad-check: passed
// CHECK: relu6: grad-check: passed
// CHECK: leaky_relu: grad-check: passed
// CHECK: silu: grad-check: passed
// CHECK: sigmoid: grad-check: passed
// CHECK: tanh: grad-check: passed
// CHECK: linear: grad-check: passed
// CHECK: laplace: grad-check: passed
// CHECK: mish: grad-check: passed
func.func @act(%tokens: tensor<2x5xi32>, %targets: tensor<2x5xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.5} : tensor<11x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<11x8xf64>, tensor<2x5xi32>) -> tensor<2x5x8xf64>
  %y = weft.act %x {kind = "KIND"} : tensor<2x5x8xf64>
  %head = weft.param "head" {init = "normal", std = 0.5} : tensor<8x11xf64>
  %logits = weft.matmul %y, %head : (tensor<2x5x8xf64>, tensor<8x11xf64>) -> tensor<2x5x11xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x5x11xf64>, tensor<2x5xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
