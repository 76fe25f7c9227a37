// RUN: weft-opt %s -split-input-file -weft-pad-vocab=multiple=2 | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-pad-vocab=multiple=4 | FileCheck %s --check-prefix=FOUR

// A vocabulary of 31 ids on tp=2: Megatron pads it to 32. The tied table
// (embedding and head) gets a padding row and keeps its 31 model rows as
// weft.logical_rows (the runtime initialises and checkpoints only those);
// the head's logits gain a padding column, which the cross-entropy's
// `classes` keeps outside the softmax. Nothing else changes.
// CHECK-LABEL: func.func @tied
// CHECK: weft.param "wte" {{.*}}weft.logical_rows = 31 : i64{{.*}} : tensor<32x16xf32>
// FOUR-LABEL: func.func @tied
// FOUR: weft.param "wte" {{.*}}weft.logical_rows = 31 : i64{{.*}} : tensor<32x16xf32>
// CHECK: weft.embedding {{.*}} : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
// CHECK: weft.matmul {{.*}} -> tensor<4x8x32xf32>
// CHECK: weft.cross_entropy {{.*}} {classes = 31 : i64} : (tensor<4x8x32xf32>, tensor<4x8xi32>)
func.func @tied(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<31x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<31x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %g = weft.param "g" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<31x16xf32>) -> tensor<4x8x31xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x31xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Untied: the token table and the head are padded alike.
// CHECK-LABEL: func.func @untied
// CHECK: weft.param "embed" {{.*}}weft.logical_rows = 31 : i64{{.*}} : tensor<32x16xf32>
// CHECK: weft.param "head" {{.*}}weft.logical_rows = 31 : i64{{.*}} : tensor<32x16xf32>
// CHECK: weft.cross_entropy {{.*}} {classes = 31 : i64}
func.func @untied(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %e = weft.param "embed" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<31x16xf32>
  %x = weft.embedding %e, %tokens : (tensor<31x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %g = weft.param "g" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %w = weft.param "head" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<31x16xf32>
  %logits = weft.matmul %h, %w {transpose_b = true} : (tensor<4x8x16xf32>, tensor<31x16xf32>) -> tensor<4x8x31xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x31xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Returned logits (a forward-only program's) keep their width: the model
// is left as it is, and weft-apply-layout keeps the table replicated.
// CHECK-LABEL: func.func @returned
// CHECK-NOT: logical_rows
// CHECK: weft.param "wte" {{.*}} : tensor<31x16xf32>
// CHECK-NOT: classes
func.func @returned(%tokens: tensor<4x8xi32>) -> tensor<4x8x31xf32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<31x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<31x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %g = weft.param "g" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<31x16xf32>) -> tensor<4x8x31xf32>
  return %logits : tensor<4x8x31xf32>
}

// -----

// A vocabulary 2 divides: nothing to pad.
// CHECK-LABEL: func.func @divisible
// CHECK-NOT: logical_rows
// CHECK: weft.param "wte" {{.*}} : tensor<32x16xf32>
// CHECK-NOT: classes
func.func @divisible(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<32x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = weft.matmul %x, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// 5 ids: on tp=2 padded to 6 (shards of 3, the last with 2 real rows). On
// tp=4 the padding to 8 would leave the last shard of 2 rows all padding
// (its softmax statistics would read as an ignored row's): not padded.
// CHECK-LABEL: func.func @tiny
// CHECK: weft.param "wte" {{.*}}weft.logical_rows = 5 : i64{{.*}} : tensor<6x16xf32>
// FOUR-LABEL: func.func @tiny
// FOUR-NOT: logical_rows
// FOUR: weft.param "wte" {{.*}} : tensor<5x16xf32>
func.func @tiny(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<5x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<5x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = weft.matmul %x, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<5x16xf32>) -> tensor<4x8x5xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x5xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
