// RUN: weft-opt %s -split-input-file -weft-return-logits -verify-diagnostics | FileCheck %s

// A training forward (tokens, targets) -> loss becomes tokens -> logits:
// the cross-entropy goes, and with it the targets argument.
// CHECK-LABEL: func @forward
// CHECK-SAME:  (%[[IDS:.*]]: tensor<2x4xi32>) -> tensor<2x4x16xf32>
// CHECK:       %[[T:.*]] = weft.param "wte"
// CHECK:       %[[E:.*]] = weft.embedding %[[T]], %[[IDS]]
// CHECK:       %[[L:.*]] = weft.matmul %[[E]], %[[T]] {transpose_b = true}
// CHECK-NOT:   weft.cross_entropy
// CHECK:       return %[[L]] : tensor<2x4x16xf32>
func.func @forward(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %e, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A returned value no cross-entropy computes: there are no logits to return.
func.func @not_a_loss(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %f = weft.fill {value = 0.0 : f64} : tensor<f32>
  // expected-error @+1 {{returns 'tensor<f32>' not computed by weft.cross_entropy: no logits to return}}
  return %f : tensor<f32>
}

// -----

// The targets read by another op: dropping them would change what it
// computes.
func.func @targets_read_twice(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{reads the targets, which a forward-only function does not have}}
  %e2 = weft.embedding %t, %targets : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %s = weft.add %e, %e2 : tensor<2x4x8xf32>
  %logits = weft.matmul %s, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Already forward-only (one argument): refused, not rewritten twice.
// expected-error @+1 {{expects @once(tokens, targets) -> loss, got 1 arguments and 1 results}}
func.func @once(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}

// -----

// A function of named tensors (a graph of float inputs) is already
// forward-only: kept, except that an output which is an input itself
// (an ONNX Identity) is returned through a copy, a buffer the forward
// writes.
// CHECK-LABEL: func @named
// CHECK-SAME:  (%[[X:.*]]: tensor<2x3xf32> {weft.input = "x"})
// CHECK:       %[[E:.*]] = weft.pointwise %[[X]] {fn = "exp"}
// CHECK:       %[[C:.*]] = weft.reshape %[[X]] : tensor<2x3xf32> to tensor<2x3xf32>
// CHECK:       return %[[E]], %[[C]]
func.func @named(%x: tensor<2x3xf32> {weft.input = "x"}) -> (tensor<2x3xf32> {weft.output = "e"}, tensor<2x3xf32> {weft.output = "same"}) {
  %e = weft.pointwise %x {fn = "exp"} : tensor<2x3xf32>
  return %e, %x : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Named in part: refused, naming the result (weft-emit-program would have
// had no name to write; it crashed on one before).
// expected-error @+1 {{result 1 has no weft.output name, but the function names its other tensors}}
func.func @named_in_part(%x: tensor<2x3xf32> {weft.input = "x"}) -> (tensor<2x3xf32> {weft.output = "e"}, tensor<2x3xf32>) {
  %e = weft.pointwise %x {fn = "exp"} : tensor<2x3xf32>
  %n = weft.pointwise %x {fn = "neg"} : tensor<2x3xf32>
  return %e, %n : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// expected-error @+1 {{argument 1 repeats the input name 'x'}}
func.func @named_twice(%x: tensor<2x3xf32> {weft.input = "x"}, %y: tensor<2x3xf32> {weft.input = "x"}) -> (tensor<2x3xf32> {weft.output = "s"}) {
  %s = weft.binary %x, %y {fn = "add"} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}
