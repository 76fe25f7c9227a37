// Tensor sizes past weft's bound (2^48 elements) are refused before any size
// arithmetic (issue 9): a 2^62-element parameter made weft-compile's byte
// counts and the memory planner's arena overflow int64, and it wrote a
// program with a 0 MiB arena and exit 0.
// RUN: not weft-compile %s -o %t.weft 2>&1 | FileCheck %s --check-prefix=COMPILE
// COMPILE: error: result #0 of 'weft.param' of type tensor<16x4611686018427387904xf32> has a dimension 4611686018427387904 past 2^48
// COMPILE-NOT: parameters
// RUN: not weft-opt %s -weft-plan-memory 2>&1 | FileCheck %s --check-prefix=PLAN
// PLAN: error: result #0 of 'weft.param' of type tensor<16x4611686018427387904xf32> has a dimension 4611686018427387904 past 2^48
func.func @huge(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x4611686018427387904xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x4611686018427387904xf32>, tensor<2x4xi32>) -> tensor<2x4x4611686018427387904xf32>
  %g = weft.param "g" {init = "ones"} : tensor<4611686018427387904xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<2x4x4611686018427387904xf32>, tensor<4611686018427387904xf32>) -> tensor<2x4x4611686018427387904xf32>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<2x4x4611686018427387904xf32>, tensor<16x4611686018427387904xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
