// RUN: weft-opt %s -weft-recompute="mode=full" | FileCheck %s
// RUN: weft-opt %s -weft-recompute="mode=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: weft-opt %s -weft-recompute="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: not weft-opt %s -weft-recompute="mode=most" 2>&1 | FileCheck %s --check-prefix=BAD

// One layer between an embedding and a head, and a backward that reads the
// layer's hidden activation %h (the matmul's weight gradient) and the
// attention's output %a.
//
// Full: the layer's forward ops that lead to what the backward reads are
// cloned right before the first backward op that reads one, and the
// backward reads the clones; the layer's input %x (the embedding's output)
// and output %y (what the head reads) are kept.
// CHECK-LABEL: func @layer
// CHECK:       %[[X:.*]] = weft.embedding
// CHECK:       %[[H:.*]] = weft.matmul %[[X]], %[[W:[^ ]*]] :
// CHECK:       %[[A:.*]] = weft.attention %[[H]], %[[H]], %[[H]]
// CHECK:       %[[Y:.*]] = weft.matmul %[[A]], %[[W]] :
// CHECK:       weft.cross_entropy_grad
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>
// CHECK-NEXT:  %[[H2:.*]] = weft.matmul %[[X]], %[[W]] :
// CHECK-NEXT:  %[[A2:.*]] = weft.attention %[[H2]], %[[H2]], %[[H2]]
// CHECK-NEXT:  weft.matmul %[[A2]], %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.matmul %[[H2]], %{{.*}} {transpose_a = true}
// CHECK-NOT:   weft.matmul %[[H]],
//
// Selective: only the attention core is recomputed, from the kept %h.
// SELECTIVE-LABEL: func @layer
// SELECTIVE:       %[[H:.*]] = weft.matmul
// SELECTIVE:       weft.cross_entropy_grad
// SELECTIVE-NEXT:  weft.matmul %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>
// SELECTIVE-NEXT:  %[[A2:.*]] = weft.attention %[[H]], %[[H]], %[[H]]
// SELECTIVE-NEXT:  weft.matmul %[[A2]], %{{.*}} {transpose_a = true}
// SELECTIVE-NEXT:  weft.matmul %[[H]], %{{.*}} {transpose_a = true}
//
// NONE-LABEL:  func @layer
// NONE-COUNT-1: weft.attention
// NONE-NOT:     weft.attention
//
// BAD: weft-recompute: unknown mode 'most' (expected none, selective or full)
func.func @layer(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %e = weft.param "embed" {init = "zeros", weft.layer = -1 : i64} : tensor<16x8xf32>
  %w = weft.param "h.0.w" {init = "zeros", weft.layer = 0 : i64} : tensor<8x8xf32>
  %head = weft.param "head" {init = "zeros", weft.layer = 1 : i64} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %a = weft.attention %h, %h, %h {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %y = weft.matmul %a, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %y, %head {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = weft.fill {value = 1.0 : f64} : tensor<f32>
  %dl = weft.cross_entropy_grad %logits, %targets, %seed : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  %dy = weft.matmul %dl, %head : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dw1 = weft.matmul %a, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw2 = weft.matmul %h, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dw = weft.add %dw1, %dw2 : tensor<8x8xf32>
  weft.param_grad "h.0.w", %dw : tensor<8x8xf32>
  return %loss : tensor<f32>
}
