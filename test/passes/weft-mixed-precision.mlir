// RUN: weft-opt %s -split-input-file -weft-mixed-precision="dtype=bf16" -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-mixed-precision | FileCheck %s --check-prefix=F32
// RUN: weft-opt %s -split-input-file -weft-mixed-precision="dtype=bf16" -weft-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD

// A tied embedding: the parameter stays f32 and gets a bf16 copy per op
// that reads it, before that op (the lookup's and the LM head's); every
// activation is bf16; the cross-entropy of the bf16 logits is an f32 loss
// (its softmax runs in f32).
// CHECK-LABEL: func @tied_embedding
// CHECK:      %[[WTE:.*]] = weft.param "wte" {{.*}} : tensor<16x8xf32>
// CHECK-NEXT: %[[WTE16:.*]] = weft.cast %[[WTE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK-NEXT: %[[X:.*]] = weft.embedding %[[WTE16]], %{{.*}} : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
// CHECK:      %[[G16:.*]] = weft.cast %{{.*}} : tensor<8xf32> to tensor<8xbf16>
// CHECK-NEXT: %[[H:.*]] = weft.rms_norm %[[X]], %[[G16]] {{.*}} -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[HEAD16:.*]] = weft.cast %[[WTE]] : tensor<16x8xf32> to tensor<16x8xbf16>
// CHECK-NEXT: %[[LOGITS:.*]] = weft.matmul %[[H]], %[[HEAD16]] {transpose_b = true} : (tensor<2x4x8xbf16>, tensor<16x8xbf16>) -> tensor<2x4x16xbf16>
// CHECK-NEXT: %[[LOSS:.*]] = weft.cross_entropy %[[LOGITS]], %{{.*}} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
// The default (dtype=f32) changes nothing.
// F32-LABEL: func @tied_embedding
// F32-NOT:   weft.cast
// F32:       weft.matmul {{.*}} -> tensor<2x4x16xf32>
// Autodiff turns each cast into the cast back: the loss gradient is f32, the
// logits' gradient and the rest of the backward bf16, and the parameters'
// gradients arrive in f32. The tied one's two gradients, each cast back
// from its own copy, are summed in f32 (one shared copy would sum them in
// bf16 and round the sum).
// GRAD-LABEL: func @tied_embedding
// GRAD:      %[[ONE:.*]] = weft.fill {value = 1.000000e+00 : f64} : tensor<f32>
// GRAD-NEXT: %[[DLOGITS:.*]] = weft.cross_entropy_grad %{{.*}}, %{{.*}}, %[[ONE]] : (tensor<2x4x16xbf16>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xbf16>
// GRAD-NOT:  weft.add {{.*}} : tensor<16x8xbf16>
// GRAD:      %[[DWTE:.*]] = weft.add {{.*}} : tensor<16x8xf32>
// GRAD-NOT:  weft.cast %[[DWTE]]
// GRAD:      weft.param_grad "wte", %[[DWTE]] : tensor<16x8xf32>
// GRAD:      weft.param_grad "g", %{{.*}} : tensor<8xf32>
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

// Master weights must be f32: an f64 model is refused, naming the parameter.
func.func @f64_model(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f64> {
  // expected-error @+1 {{is 'tensor<16x8xf64>'; mixed precision keeps f32 master weights}}
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf64>, tensor<2x4xi32>) -> tensor<2x4x8xf64>
  %logits = weft.matmul %x, %wte {transpose_b = true} : (tensor<2x4x8xf64>, tensor<16x8xf64>) -> tensor<2x4x16xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf64>, tensor<2x4xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}

// -----

// It runs before autodiff: a differentiated model is refused.
func.func @after_autodiff(%tokens: tensor<2x4xi32>) {
  %w = weft.param "w" {init = "zeros"} : tensor<8xf32>
  // expected-error @+1 {{is training state: weft-mixed-precision runs on the forward model, before weft-autodiff}}
  weft.param_grad "w", %w : tensor<8xf32>
  return
}

// -----

// The generic path: ops with a written result type (reduce, reshape,
// broadcast) keep their shape and take their operand's bf16; inferred ones
// (binary, pointwise, softmax) follow their operands.
// CHECK-LABEL: func @generic
// CHECK:      %[[S:.*]] = weft.reduce %{{.*}} : tensor<2x4x8xbf16> to tensor<2x4x1xbf16>
// CHECK-NEXT: %[[M:.*]] = weft.pointwise %[[S]] {fn = "div", scalar = 8.000000e+00 : f64} : tensor<2x4x1xbf16>
// CHECK-NEXT: %[[C:.*]] = weft.binary %{{.*}}, %[[M]] {fn = "sub"} : (tensor<2x4x8xbf16>, tensor<2x4x1xbf16>) -> tensor<2x4x8xbf16>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[C]] : tensor<2x4x8xbf16> to tensor<2x4x2x4xbf16>
// CHECK-NEXT: weft.softmax %[[R]] : tensor<2x4x2x4xbf16>
func.func @generic(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %s = weft.reduce %x : tensor<2x4x8xf32> to tensor<2x4x1xf32>
  %m = weft.pointwise %s {fn = "div", scalar = 8.0} : tensor<2x4x1xf32>
  %c = weft.binary %x, %m {fn = "sub"} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %r = weft.reshape %c : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %p = weft.softmax %r : tensor<2x4x2x4xf32>
  %y = weft.reshape %p : tensor<2x4x2x4xf32> to tensor<2x4x8xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A constant is read through one bf16 copy like a parameter. A finite
// value past bf16's range (HF's mask fill, finfo(float32).min) saturates
// to bf16's largest magnitude rather than round to an infinity in the
// copy; an infinity stays one.
// CHECK-LABEL: func @constant_fill
// CHECK:      %[[C:.*]] = weft.constant dense<[-3.38953139E+38, 0xFF800000, 1.000000e+00, 3.38953139E+38]> : tensor<4xf32>
// CHECK-NEXT: %[[C16:.*]] = weft.cast %[[C]] : tensor<4xf32> to tensor<4xbf16>
// CHECK:      weft.binary %{{.*}}, %[[C16]] {fn = "add"} : (tensor<2x4x4xbf16>, tensor<4xbf16>) -> tensor<2x4x4xbf16>
func.func @constant_fill(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x4xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %fill = weft.constant dense<[-3.40282347E+38, 0xFF800000, 1.0, 3.40282347E+38]> : tensor<4xf32>
  %m = weft.binary %x, %fill {fn = "add"} : (tensor<2x4x4xf32>, tensor<4xf32>) -> tensor<2x4x4xf32>
  %logits = weft.matmul %m, %wte {transpose_b = true} : (tensor<2x4x4xf32>, tensor<16x4xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A regression's loss compares the bf16 prediction with the program's f32
// targets: on one f32 copy of the prediction, the loss f32; its gradient
// is f32 and casts back to the bf16 backward.
// CHECK-LABEL: func @mse
// CHECK:      %[[P:.*]] = weft.gelu %{{.*}} : tensor<2x1xbf16>
// CHECK-NEXT: %[[P32:.*]] = weft.cast %[[P]] : tensor<2x1xbf16> to tensor<2x1xf32>
// CHECK-NEXT: %[[L:.*]] = weft.mse_loss %[[P32]], %arg0 : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[L]] : tensor<f32>
// GRAD-LABEL: func @mse
// GRAD:      %[[D:.*]] = weft.mse_loss_grad %{{.*}}, %arg0, %{{.*}} : (tensor<2x1xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
// GRAD-NEXT: weft.cast %[[D]] : tensor<2x1xf32> to tensor<2x1xbf16>
func.func @mse(%y: tensor<2x1xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<2x1xf32>
  %p = weft.gelu %w : tensor<2x1xf32>
  %l = weft.mse_loss %p, %y : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
