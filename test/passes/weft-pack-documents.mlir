// RUN: weft-opt %s -split-input-file -weft-pack-documents="eos=3" -verify-diagnostics | FileCheck %s
// RUN: not weft-opt %s -split-input-file -weft-pack-documents="eos=16" 2>&1 | FileCheck %s --check-prefix=VOCAB

// Rows pack documents ending with token 3: the function records it (the
// runtime bounds attention and positions by the documents it finds in each
// step's tokens), and the loss becomes masked: an EOS's target, the next
// document's first token, counts for nothing.
// CHECK-LABEL: func @forward
// CHECK-SAME:  weft.documents = {eos = 3 : i64, given_targets = false}
// CHECK:       weft.cross_entropy %{{.*}}, %{{.*}} {masked}
// An id outside the vocabulary is refused by name.
// VOCAB:       error: --documents=16 is not a token id of the model's vocabulary [0, 16)
func.func @forward(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %a = weft.attention %e, %e, %e {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %a, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// An encoder's attention reads both directions: packing would need both
// bounded, which --documents does not do.
func.func @encoder(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @+1 {{'weft.attention' op is bidirectional: --documents bounds causal attention to each document}}
  %a = weft.attention %e, %e, %e {num_heads = 2 : i64, num_kv_heads = 2 : i64, bidirectional} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %a, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Without weft.attention there is nothing to bound.
// expected-error @+1 {{has no weft.attention: --documents bounds attention to each document}}
func.func @bigram(%ids: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %t = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %e = weft.embedding %t, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %e, %t {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
