// RUN: weft-opt %s -split-input-file -weft-masked-lm="mask-token=4" -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-masked-lm="mask-token=4" -weft-autodiff -verify-diagnostics | FileCheck %s --check-prefix=GRAD
// RUN: weft-opt %s -split-input-file -weft-masked-lm="given-targets=true" -verify-diagnostics | FileCheck %s --check-prefix=GIVEN
// RUN: not weft-opt %s -split-input-file -weft-masked-lm="mask-token=16" 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: not weft-opt %s -split-input-file -weft-masked-lm="mask-token=-1" 2>&1 | FileCheck %s --check-prefix=NOTOKEN
// RUN: not weft-opt %s -split-input-file -weft-masked-lm="mask-token=4 mask-prob=0" 2>&1 | FileCheck %s --check-prefix=PROB

// The returned cross-entropy becomes masked (targets of -100 ignored, the
// mean over the step's counted targets), and the function records how the
// runtime hides tokens: BERT's 15%, seed 0 by default.
// CHECK-LABEL: func @forward
// CHECK-SAME:  weft.masked_lm = {mask_prob = 1.500000e-01 : f64, mask_token = 4 : i64, seed = 0 : i64}
// CHECK:       weft.cross_entropy %{{.*}}, %{{.*}} {masked}
// The gradient is masked alike.
// GRAD:        weft.cross_entropy_grad {{.*}} {masked}
// Given targets (--loss cross-entropy): the loss is masked, and there is
// no recipe: the caller gives every step's inputs and targets.
// GIVEN-LABEL: func @forward
// GIVEN-NOT:   weft.masked_lm
// GIVEN:       weft.cross_entropy %{{.*}}, %{{.*}} {masked}
// A mask id outside the vocabulary, or none, is refused by name.
// VOCAB:       error: --mask-token=16 is not a token id of the model's vocabulary [0, 16)
// NOTOKEN:     error: --mask-token=-1 is not a token id of the model's vocabulary [0, 16): a masked-LM loss needs the id that hides a token
// PROB:        error: --mask-prob=0.000000e+00 is not a probability in (0, 1]
func.func @forward(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %e, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A function that does not return a cross-entropy of logits (an encoder's
// hidden states) has no masked-LM loss.
// expected-error @+1 {{a masked-language-model loss needs @hidden(tokens, targets) returning the cross-entropy of logits over the vocabulary against the targets; this function returns 1 value(s) not so computed}}
func.func @hidden(%ids: tensor<2x4xi32>) -> tensor<2x4x8xf32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %e : tensor<2x4x8xf32>
}
