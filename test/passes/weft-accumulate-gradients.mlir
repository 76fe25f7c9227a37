// RUN: weft-opt %s -split-input-file -weft-accumulate-gradients="microbatches=4" -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-accumulate-gradients="microbatches=1" -verify-diagnostics | FileCheck %s --check-prefix=ONE
// RUN: weft-opt %s -split-input-file -weft-accumulate-gradients="microbatches=2 gather-once=false" -verify-diagnostics | FileCheck %s --check-prefix=ONCE

// Data parallelism over 4 micro-batches. The function is one micro-batch:
// - the gradients are cleared once per step (prologue, first);
// - each micro-batch adds its unreduced gradient to the stored one;
// - the all-reduce leaves the micro-batch: it reduces the accumulated sum
//   once per step, before the optimizer (DDP's no_sync);
// - the cross-entropy divides by the step's rows (4 x 2 x 4 = 32), and the
//   loss all-reduce stays per micro-batch (the runtime sums the losses).
// CHECK-LABEL: func @dp
// CHECK-SAME:  weft.microbatches = 4
// CHECK-NEXT:  %[[Z:.*]] = weft.fill {value = 0.000000e+00 : f64, weft.fragment = "prologue"}
// CHECK-NEXT:  weft.param_grad "w", %[[Z]] {weft.fragment = "prologue"}
// CHECK:       weft.cross_entropy %{{.*}}, %{{.*}} {denominator = 32 : i64}
// CHECK:       weft.all_reduce %{{.*}} {axes = ["dp"]} : (tensor<f32>)
// CHECK:       %[[DW:.*]] = weft.matmul
// CHECK-NEXT:  weft.param_grad "w", %[[DW]] {accumulate}
// CHECK-NEXT:  %[[S:.*]] = weft.stored_grad "w" {weft.fragment = "optimizer"}
// CHECK-NEXT:  %[[R:.*]] = weft.all_reduce %[[S]] {axes = ["dp"], weft.fragment = "optimizer"}
// CHECK-NEXT:  weft.param_grad "w", %[[R]] {weft.fragment = "optimizer"}
// CHECK-NEXT:  weft.adamw
// One micro-batch: nothing changes.
// ONE-LABEL:   func @dp
// ONE-NOT:     weft.microbatches
// ONE-NOT:     accumulate
// ONE:         weft.cross_entropy %{{.*}}, %{{.*}} {denominator = 8 : i64}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @dp(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x16xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x16xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss = weft.all_reduce %l {axes = ["dp"]} : (tensor<f32>) -> tensor<f32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %r = weft.all_reduce %dw {axes = ["dp"]} : (tensor<8x16xf32>) -> tensor<8x16xf32>
  weft.param_grad "w", %r : tensor<8x16xf32>
  weft.adamw %w {weight_decay = true} : tensor<8x16xf32>
  return %loss : tensor<f32>
}

// -----

// ZeRO-2: the gradient is reduce-scattered to this rank's shard. That stays
// per micro-batch (deferring it would keep a whole unreduced gradient per
// rank); the shards accumulate. One rank, no mesh: the cross-entropy gets
// the step's rows as its denominator (4 x 8).
// CHECK-LABEL: func @zero2
// CHECK:       weft.cross_entropy %{{.*}}, %{{.*}} {denominator = 32 : i64}
// CHECK:       %[[RS:.*]] = weft.reduce_scatter
// CHECK-NEXT:  weft.param_grad "w", %[[RS]] {accumulate}
// CHECK-NOT:   weft.stored_grad
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero2(%targets: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x16xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x16xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %l = weft.cross_entropy %y, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x16xf32>) -> tensor<8x16xf32>
  %r = weft.reduce_scatter %dw {axes = ["dp"], dim = 0 : i64} : (tensor<8x16xf32>) -> tensor<4x16xf32>
  weft.param_grad "w", %r : tensor<4x16xf32>
  return %l : tensor<f32>
}

// -----

// ZeRO-3: a parameter gathered at each use (here forward and backward). The
// gather moves to the prologue and runs once per step, once per parameter:
// the backward's gather of the same parameter reads the same copy (the
// parameters move to the top so that they dominate); weft-plan-memory keeps
// the copy through the micro-batches. With gather-once=false both stay per
// micro-batch.
// CHECK-LABEL: func @zero3
// CHECK-NEXT:  %[[W:.*]] = weft.param "w"
// CHECK-NEXT:  %[[G1:.*]] = weft.all_gather %[[W]] {axes = ["dp"], dim = 0 : i64, weft.fragment = "prologue"}
// CHECK-NOT:   weft.all_gather
// CHECK:       weft.matmul %{{.*}}, %[[G1]]
// CHECK:       weft.matmul %{{.*}}, %[[G1]]
// ONCE-LABEL:  func @zero3
// ONCE:        weft.matmul
// ONCE-NEXT:   weft.all_gather
// ONCE-NOT:    weft.fragment = "prologue"}
// ONCE:        return
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero3(%targets: tensor<2x4xi32>, %x: tensor<2x4x8xf32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %l = weft.cross_entropy %x, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %w = weft.param "w" {init = "zeros"} : tensor<4x8xf32>
  %g1 = weft.all_gather %w {axes = ["dp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y = weft.matmul %x, %g1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g2 = weft.all_gather %w {axes = ["dp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %dx = weft.matmul %dy, %g2 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// -----

// Mixed precision: a parameter's bf16 copy that the backward reads (%wc,
// read by the input gradient's matmul) is the same every micro-batch, so
// it is made once per step, in the prologue, after the parameters; a copy
// only the forward reads (%ec, an embedding table's) stays where it is
// used. (weft-store-gradients-early then moves the store and its
// reduce-scatter up to the gradient.)
// CHECK-LABEL: func @bf16
// CHECK:       %[[W:.*]] = weft.param "w"
// CHECK-NEXT:  %[[E:.*]] = weft.param "e"
// CHECK-NEXT:  %[[WC:.*]] = weft.cast %[[W]] {weft.fragment = "prologue"}
// CHECK-NEXT:  weft.cast %[[E]] :
// CHECK:       %[[DW:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  %[[RS:.*]] = weft.reduce_scatter %[[DW]]
// CHECK-NEXT:  weft.matmul %{{.*}}, %[[WC]] {transpose_b = true}
// CHECK-NEXT:  weft.param_grad "w", %[[RS]] {accumulate}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @bf16(%targets: tensor<2x4xi32>, %x: tensor<2x4x8xbf16>, %dy: tensor<2x4x8xbf16>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x8xf32>
  %wc = weft.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
  %e = weft.param "e" {init = "zeros"} : tensor<8x8xf32>
  %ec = weft.cast %e : tensor<8x8xf32> to tensor<8x8xbf16>
  %y = weft.matmul %x, %wc : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %z = weft.matmul %y, %ec : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %l = weft.cross_entropy %z, %targets {denominator = 8 : i64} : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<8x8xbf16>
  %rs = weft.reduce_scatter %dw {axes = ["dp"], dim = 0 : i64} : (tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %dx = weft.matmul %dy, %wc {transpose_b = true} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  weft.param_grad "w", %rs : tensor<4x8xbf16>
  return %l : tensor<f32>
}

// -----

// Negative: a micro-batch count the runtime cannot schedule.
// RUN: not weft-opt %s -split-input-file -weft-accumulate-gradients="microbatches=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: microbatches must be 1 to 2^20, got 0
func.func @none(%l: tensor<f32>) -> tensor<f32> {
  return %l : tensor<f32>
}
