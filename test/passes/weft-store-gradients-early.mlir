// RUN: weft-opt %s -split-input-file -weft-store-gradients-early | FileCheck %s

// ZeRO-2/3: autodiff stores the gradients at the backward's end, so %dw,
// whole and unreduced, would wait there for its reduce-scatter while the
// rest of the backward runs. The store moves right after the matmul that
// makes %dw, with the reduce-scatter that only feeds it; so does %dv's,
// with its all-reduce (data parallelism).
// CHECK-LABEL: func @zero
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[DW:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  %[[RS:.*]] = weft.reduce_scatter %[[DW]]
// CHECK-NEXT:  weft.param_grad "w", %[[RS]]
// CHECK-NEXT:  %[[DV:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  %[[AR:.*]] = weft.all_reduce %[[DV]]
// CHECK-NEXT:  weft.param_grad "v", %[[AR]]
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  return
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero(%targets: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x8xf32>
  %v = weft.param "v" {init = "zeros"} : tensor<8x8xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dv = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %rs = weft.reduce_scatter %dw {axes = ["dp"], dim = 0 : i64} : (tensor<8x8xf32>) -> tensor<4x8xf32>
  %ar = weft.all_reduce %dv {axes = ["dp"]} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "w", %rs : tensor<4x8xf32>
  weft.param_grad "v", %ar : tensor<8x8xf32>
  return %l : tensor<f32>
}

// -----

// Negative: a reduction weft-accumulate-gradients moved to the optimizer
// fragment (once per step) stays there with its store, and a gradient made
// in the forward (%g, before the loss) is not stored in the forward.
// CHECK-LABEL: func @fragments_and_forward
// CHECK:       %[[G:.*]] = weft.matmul
// CHECK-NEXT:  weft.cross_entropy
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  weft.param_grad "u", %[[G]]
// CHECK-NEXT:  weft.stored_grad "w" {weft.fragment = "optimizer"}
// CHECK-NEXT:  weft.all_reduce {{.*}}weft.fragment = "optimizer"
// CHECK-NEXT:  weft.param_grad "w", %{{.*}} {weft.fragment = "optimizer"}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @fragments_and_forward(%targets: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x8xf32>
  %u = weft.param "u" {init = "zeros"} : tensor<8x8xf32>
  %g = weft.matmul %x, %x {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %l = weft.cross_entropy %x, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  weft.param_grad "u", %g : tensor<8x8xf32>
  %s = weft.stored_grad "w" {weft.fragment = "optimizer"} : tensor<8x8xf32>
  %r = weft.all_reduce %s {axes = ["dp"], weft.fragment = "optimizer"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "w", %r {weft.fragment = "optimizer"} : tensor<8x8xf32>
  return %l : tensor<f32>
}
