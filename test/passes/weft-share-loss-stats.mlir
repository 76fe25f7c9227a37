// RUN: weft-opt %s -split-input-file -weft-share-loss-stats | FileCheck %s

// A cross-entropy and its gradient: one pass of statistics in the forward,
// the loss from them, and the gradient in one pass from the same ones. The
// ops keep their marks; the denominator is the targets' rows.
// CHECK-LABEL: func @shared
// CHECK-NOT:  weft.cross_entropy %
// CHECK-NOT:  weft.cross_entropy_grad
// CHECK:      %[[S:.*]] = weft.cross_entropy_stats %arg0, %arg1 {vocab_axes = [], weft.fragment = "forward"} : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<1x2x16x3xf32>
// CHECK-NEXT: %[[L:.*]] = weft.cross_entropy_from_stats %[[S]] {denominator = 32 : i64, weft.fragment = "forward"} : (tensor<1x2x16x3xf32>) -> tensor<f32>
// CHECK:      weft.cross_entropy_stats_grad %arg0, %arg1, %[[S]], %arg2 {denominator = 32 : i64, vocab_axes = [], weft.fragment = "backward"}
func.func @shared(%x: tensor<2x16x256xf32>, %t: tensor<2x16xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x16x256xf32>) {
  %l = weft.cross_entropy %x, %t {weft.fragment = "forward"} : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %g = weft.cross_entropy_grad %x, %t, %d {weft.fragment = "backward"} : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  return %l, %g : tensor<f32>, tensor<2x16x256xf32>
}

// -----

// weft-partition's denominator (the step's rows over dp = 2), a masked loss
// and a padded vocabulary's classes carry over.
// CHECK-LABEL: func @partitioned
// CHECK:      %[[S:.*]] = weft.cross_entropy_stats %arg0, %arg1 {classes = 250 : i64, masked, vocab_axes = []}
// CHECK-NEXT: weft.cross_entropy_from_stats %[[S]] {denominator = 64 : i64, masked}
// CHECK:      weft.cross_entropy_stats_grad %arg0, %arg1, %[[S]], %arg2 {classes = 250 : i64, denominator = 64 : i64, masked, vocab_axes = []}
func.func @partitioned(%x: tensor<2x16x256xf32>, %t: tensor<2x16xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x16x256xf32>) {
  %l = weft.cross_entropy %x, %t {classes = 250 : i64, masked, denominator = 64 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %g = weft.cross_entropy_grad %x, %t, %d {classes = 250 : i64, masked, denominator = 64 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  return %l, %g : tensor<f32>, tensor<2x16x256xf32>
}

// -----

// Left alone: a forward-only loss (no gradient); a gradient of other
// targets than the loss's; one whose loss counts other rows.
// CHECK-LABEL: func @not_shared
// CHECK-NOT:  cross_entropy_stats
// CHECK-COUNT-2: weft.cross_entropy_grad
func.func @not_shared(%x: tensor<2x16x256xf32>, %t: tensor<2x16xi32>, %u: tensor<2x16xi32>, %d: tensor<f32>)
    -> (tensor<f32>, tensor<f32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>) {
  %l1 = weft.cross_entropy %x, %t : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %g1 = weft.cross_entropy_grad %x, %u, %d : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  %l2 = weft.cross_entropy %x, %u {denominator = 64 : i64} : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %g2 = weft.cross_entropy_grad %x, %u, %d : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  return %l1, %l2, %g1, %g2 : tensor<f32>, tensor<f32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>
}

// -----

// Two gradients of one loss (hand-written): the first shares its
// statistics, the second keeps its own kernel.
// CHECK-LABEL: func @two_gradients
// CHECK:      %[[S:.*]] = weft.cross_entropy_stats %arg0, %arg1
// CHECK:      weft.cross_entropy_stats_grad %arg0, %arg1, %[[S]], %arg2
// CHECK-NEXT: weft.cross_entropy_grad %arg0, %arg1, %arg2
func.func @two_gradients(%x: tensor<2x16x256xf32>, %t: tensor<2x16xi32>, %d: tensor<f32>) -> (tensor<f32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>) {
  %l = weft.cross_entropy %x, %t : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %g1 = weft.cross_entropy_grad %x, %t, %d : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  %g2 = weft.cross_entropy_grad %x, %t, %d : (tensor<2x16x256xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x256xf32>
  return %l, %g1, %g2 : tensor<f32>, tensor<2x16x256xf32>, tensor<2x16x256xf32>
}
