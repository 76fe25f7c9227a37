// RUN: weft-opt %s -split-input-file -weft-fold-collectives | FileCheck %s

// An all-reduce whose only use takes this rank's block is a reduce-scatter.
// CHECK-LABEL: func @slice_of_all_reduce
// CHECK-NEXT:  %[[RS:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:  return %[[RS]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @slice_of_all_reduce(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %r = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = weft.slice %r {axes = ["tp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

// A slice over another axis than the all-reduce's moves before it: the dp
// group sums only this rank's tp block (Llama's vocab-parallel embedding
// gradient).
// CHECK-LABEL: func @slice_of_other_axis_all_reduce
// CHECK-NEXT:  %[[S:.*]] = weft.slice %arg0 {axes = ["tp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:  %[[R:.*]] = weft.all_reduce %[[S]] {axes = ["dp"]} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:  return %[[R]]
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @slice_of_other_axis_all_reduce(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  %r = weft.all_reduce %x {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = weft.slice %r {axes = ["tp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  return %s : tensor<2x8xf32>
}

// -----

// A sequence slice of a bias_add moves before it, where it meets the
// all-reduce: sequence parallelism's row-parallel output is reduce-scattered.
// CHECK-LABEL: func @slice_of_bias_add
// CHECK-NEXT:  %[[RS:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 1 : i64} : (tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:  %[[B:.*]] = weft.bias_add %[[RS]], %arg1 : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT:  return %[[B]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @slice_of_bias_add(%x: tensor<2x8x4xf32>, %bias: tensor<4xf32>) -> tensor<2x4x4xf32> {
  %r = weft.all_reduce %x {axes = ["tp"]} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %b = weft.bias_add %r, %bias : (tensor<2x8x4xf32>, tensor<4xf32>) -> tensor<2x8x4xf32>
  %s = weft.slice %b {axes = ["tp"], dim = 1} : (tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
  return %s : tensor<2x4x4xf32>
}

// -----

// Negative: a slice of the bias dim itself would need the bias sliced too,
// and a bias_add read whole elsewhere must stay whole; neither moves.
// CHECK-LABEL: func @no_slice_of_bias_add
// CHECK:       weft.all_reduce %arg0
// CHECK-NEXT:  weft.bias_add
// CHECK-NEXT:  weft.slice %{{.*}} {axes = ["tp"], dim = 1 : i64}
// CHECK:       weft.all_reduce %arg0
// CHECK-NEXT:  weft.bias_add
// CHECK-NEXT:  weft.slice %{{.*}} {axes = ["tp"], dim = 0 : i64}
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @no_slice_of_bias_add(%x: tensor<8x4xf32>, %bias: tensor<4xf32>) -> (tensor<8x2xf32>, tensor<4x4xf32>, tensor<8x4xf32>) {
  %r = weft.all_reduce %x {axes = ["tp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %b = weft.bias_add %r, %bias : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %s = weft.slice %b {axes = ["tp"], dim = 1} : (tensor<8x4xf32>) -> tensor<8x2xf32>
  %r2 = weft.all_reduce %x {axes = ["tp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %b2 = weft.bias_add %r2, %bias : (tensor<8x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
  %s2 = weft.slice %b2 {axes = ["tp"], dim = 0} : (tensor<8x4xf32>) -> tensor<4x4xf32>
  return %s, %s2, %b2 : tensor<8x2xf32>, tensor<4x4xf32>, tensor<8x4xf32>
}

// -----

// Two all-reduces feeding an add become one after it.
// CHECK-LABEL: func @add_of_all_reduces
// CHECK-NEXT:  %[[SUM:.*]] = weft.add %arg0, %arg1 : tensor<4x8xf32>
// CHECK-NEXT:  %[[R:.*]] = weft.all_reduce %[[SUM]] {axes = ["dp"], reason = "sum of two all-reduces, reduced once"}
// CHECK-NEXT:  return %[[R]]
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @add_of_all_reduces(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %ra = weft.all_reduce %a {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %rb = weft.all_reduce %b {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = weft.add %ra, %rb : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// -----

// Negative: the all-reduced value is also used whole, or the axes differ;
// nothing folds.
// CHECK-LABEL: func @no_fold
// CHECK:       weft.all_reduce %arg0 {axes = ["tp"]}
// CHECK:       weft.slice
// CHECK:       weft.all_reduce %arg1 {axes = ["dp"]}
// CHECK:       weft.all_reduce %arg1 {axes = ["tp"]}
// CHECK:       weft.add
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @no_fold(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>) {
  %r = weft.all_reduce %x {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = weft.slice %r {axes = ["tp"], dim = 0} : (tensor<4x8xf32>) -> tensor<2x8xf32>
  %a = weft.all_reduce %y {axes = ["dp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = weft.all_reduce %y {axes = ["tp"]} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %c = weft.add %a, %b : tensor<4x8xf32>
  return %r, %s, %c : tensor<4x8xf32>, tensor<2x8xf32>, tensor<4x8xf32>
}
