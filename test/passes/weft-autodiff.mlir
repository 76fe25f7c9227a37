// RUN: weft-opt %s -split-input-file -weft-autodiff -verify-diagnostics | FileCheck %s

// A tied embedding is used twice (lookup and LM head): its two gradient
// contributions are summed, and every parameter gets one weft.param_grad.
// CHECK-LABEL: func @tied_embedding
// CHECK:      %[[WTE:.*]] = weft.param "wte"
// CHECK:      %[[X:.*]] = weft.embedding %[[WTE]], %[[TOK:.*]] :
// CHECK:      %[[G:.*]] = weft.param "g"
// CHECK:      %[[H:.*]] = weft.rms_norm %[[X]], %[[G]]
// CHECK:      %[[LOGITS:.*]] = weft.matmul %[[H]], %[[WTE]] {transpose_b = true}
// CHECK:      %[[LOSS:.*]] = weft.cross_entropy %[[LOGITS]], %[[TGT:.*]] :
// Backward, in reverse order, seeded with dloss = 1:
// CHECK:      %[[ONE:.*]] = weft.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK:      %[[DLOGITS:.*]] = weft.cross_entropy_grad %[[LOGITS]], %[[TGT]], %[[ONE]]
// CHECK:      %[[DH:.*]] = weft.matmul %[[DLOGITS]], %[[WTE]] :
// CHECK:      %[[DWTE_HEAD:.*]] = weft.matmul %[[DLOGITS]], %[[H]] {transpose_a = true}
// CHECK:      %[[DX:.*]], %[[DG:.*]] = weft.rms_norm_grad %[[DH]], %[[X]], %[[G]]
// CHECK:      %[[DWTE_EMB:.*]] = weft.embedding_grad %[[DX]], %[[TOK]] {vocab = 16 : i64}
// CHECK:      %[[DWTE:.*]] = weft.add %[[DWTE_HEAD]], %[[DWTE_EMB]]
// CHECK:      weft.param_grad "wte", %[[DWTE]]
// CHECK:      weft.param_grad "g", %[[DG]]
// CHECK:      return %[[LOSS]]
func.func @tied_embedding(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// GPT-2's fused QKV: the split's VJP concatenates the three gradients; a
// part the loss never reads contributes zeros. A parameter the loss does not
// depend on gets a zero gradient.
// CHECK-LABEL: func @split_and_unused
// CHECK:      %[[ZERO_V:.*]] = weft.fill {value = 0.000000e+00 : f64} : tensor<2x4x8xf32>
// CHECK:      weft.concat %{{.*}}, %{{.*}}, %[[ZERO_V]]
// CHECK:      %[[ZERO_P:.*]] = weft.fill {value = 0.000000e+00 : f64} : tensor<3xf32>
// CHECK:      weft.param_grad "unused", %[[ZERO_P]]
func.func @split_and_unused(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x24xf32>
  %unused = weft.param "unused" {init = "zeros"} : tensor<3xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x24xf32>, tensor<2x4xi32>) -> tensor<2x4x24xf32>
  %q, %k, %v = weft.split %x {sizes = array<i64: 8, 8, 8>} : (tensor<2x4x24xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %s = weft.mul %q, %k : tensor<2x4x8xf32>
  %w = weft.param "head" {init = "normal", std = 0.02} : tensor<8x16xf32>
  %logits = weft.matmul %s, %w : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Negative: the function must return one scalar loss.
// expected-error @+1 {{weft-autodiff expects @not_a_loss to return one scalar loss (tensor<f32>), it returns 1 values}}
func.func @not_a_loss(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// Negative: an op on the path to the loss without a VJP.
func.func @no_vjp(%x: tensor<2x16xf32>, %t: tensor<i32>) -> tensor<f32> {
  // expected-error @+1 {{'weft.reduce_rows' op is on the path to the loss but has no VJP}}
  %r = weft.reduce_rows %x : (tensor<2x16xf32>) -> tensor<16xf32>
  %loss = weft.cross_entropy %r, %t : (tensor<16xf32>, tensor<i32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A forward op's weft.layer is carried onto every op of its gradient (the
// planner counts each layer's backward by it); ops without one, such as the
// loss seed and the param_grads, stay unmarked.
// CHECK-LABEL: func @layers_carried
// CHECK:      weft.fill {value = 1.000000e+00 : f64} : tensor<f32>
// CHECK-NEXT: weft.cross_entropy_grad {{.*}} {weft.layer = 1 : i64}
// CHECK-NEXT: weft.matmul {{.*}} {weft.layer = 1 : i64}
// CHECK-NEXT: weft.matmul {{.*}} {transpose_a = true, weft.layer = 1 : i64}
// CHECK-NEXT: weft.embedding_grad {{.*}} {vocab = 16 : i64, weft.layer = -1 : i64}
// CHECK-NEXT: weft.add {{.*}} {weft.layer = -1 : i64}
// CHECK-NEXT: weft.param_grad "wte", {{[^{]*$}}
func.func @layers_carried(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.layer = -1} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens {weft.layer = -1} : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %wte {transpose_b = true, weft.layer = 1} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets {weft.layer = 1} : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A constant has no gradient: the select's gradient goes to the activation
// alone (select_grad operand 1), and the binary's gradient toward the
// constant bias, which the VJP builds, is read by nothing and dropped.
// CHECK-LABEL: func @constants
// CHECK:     weft.select_grad %{{.*}}, %{{.*}} {operand = 1 : i64}
// CHECK-NOT: weft.select_grad
// CHECK:     weft.binary_grad %{{.*}}, %{{.*}}, %{{.*}} {fn = "add", operand = 0 : i64}
// CHECK-NOT: weft.binary_grad
// CHECK:     weft.param_grad "w"
func.func @constants(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x4xf32>
  %y = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %bias = weft.constant dense<[0.0, 1.0, 2.0, 3.0]> : tensor<4xf32>
  %b = weft.binary %y, %bias {fn = "add"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %keep = weft.constant dense<[1.0, 1.0, 0.0, 1.0]> : tensor<4xf32>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %m = weft.select %keep, %ninf, %b : (tensor<4xf32>, tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = weft.cross_entropy %m, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A fused bias (weft-fuse-bias) appears only after autodiff: a matmul that
// carries one is refused, not differentiated without its bias.
func.func @fused_bias(%x: tensor<2x4xf32>, %t: tensor<2xi32>) -> tensor<f32> {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x4xf32>
  %b = weft.param "b" {init = "zeros"} : tensor<4xf32>
  // expected-error @+1 {{'weft.matmul' op has a fused bias (weft-fuse-bias), which runs after autodiff: differentiate the matmul and its bias_add}}
  %y = weft.matmul %x, %w, %b : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %l = weft.cross_entropy %y, %t : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
