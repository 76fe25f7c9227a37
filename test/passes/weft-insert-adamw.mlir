// RUN: weft-opt %s -split-input-file -weft-insert-adamw="lr=3e-4 weight-decay=0.01 schedule=cosine warmup-steps=10 total-steps=100" -verify-diagnostics | FileCheck %s

// One update per gradient, after the last gradient; decay on matrices only.
// CHECK-LABEL: func @step
// CHECK-SAME:  weft.optimizer = {beta1 = 9.000000e-01 : f64, beta2 = 0.9{{[0-9]*}} : f64, eps = 1.000000e-08 : f64, kind = "adamw", lr = 3.000000e-04 : f64, min_lr = 0.000000e+00 : f64, schedule = "cosine", total_steps = 100 : i64, warmup_steps = 10 : i64, weight_decay = 1.000000e-02 : f64}
// CHECK:      %[[W:.*]] = weft.param "w"
// CHECK:      %[[B:.*]] = weft.param "b"
// CHECK:      weft.param_grad "w"
// CHECK-NEXT: weft.param_grad "b"
// CHECK-NEXT: weft.adamw %[[W]] {weight_decay = true} : tensor<4x4xf32>
// CHECK-NEXT: weft.adamw %[[B]] {weight_decay = false} : tensor<4xf32>
// CHECK-NEXT: return
func.func @step(%dw: tensor<4x4xf32>, %db: tensor<4xf32>) {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x4xf32>
  %b = weft.param "b" {init = "zeros"} : tensor<4xf32>
  weft.param_grad "w", %dw : tensor<4x4xf32>
  weft.param_grad "b", %db : tensor<4xf32>
  return
}

// -----

// Negative: nothing to update before autodiff has run.
// expected-error @+1 {{no weft.param_grad in @forward_only: run weft-autodiff first}}
func.func @forward_only(%x: tensor<4xf32>) {
  return
}

// -----

// Negative: a gradient for a parameter that does not exist.
func.func @dangling(%dw: tensor<4x4xf32>) {
  // expected-error @+1 {{'weft.param_grad' op names no weft.param: 'ghost'}}
  weft.param_grad "ghost", %dw : tensor<4x4xf32>
  return
}

// -----

// Negative: an unknown schedule is refused (second RUN line).
// RUN: not weft-opt %s -split-input-file -weft-insert-adamw="schedule=linear" 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: bad AdamW hyper-parameters: unknown learning-rate schedule 'linear' (expected constant or cosine)
