// RUN: weft-opt %s -split-input-file -weft-cut-stages="stages=2 boundaries=0,1-2" -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-cut-stages="stages=2" -verify-diagnostics | FileCheck %s --check-prefix=BALANCED
// RUN: weft-opt %s -split-input-file -weft-cut-stages="stages=2 boundaries=0,1-2 schedule=zb-h1" -verify-diagnostics | FileCheck %s --check-prefix=ZB

// Three layers on two stages, cut as --stages 0,1-2 says: layer 0, then 1-2. Each weft.param's stage is its layer's: the
// embedding (layer -1) on the first, the head (layer 3) on the last. The
// ops follow by dataflow; each stage keeps the ops of its layers in their
// order, sends what the other stage reads at the end of the fragment that
// makes it, and receives it at the start of the fragment that reads it.
// Only the last stage returns the loss.
//
// CHECK-LABEL: func.func @step_stage0(%{{[^)]*}}) attributes
// CHECK-SAME:  weft.num_stages = 2 : i64, weft.pipeline_axis = "pp", weft.pipeline_schedule = #weft.schedule<kind = "1f1b">, weft.stage = 0 : i64
// CHECK-NOT:   weft.param "h.1.w"
// CHECK:       %[[X:.*]] = weft.embedding {{.*}}weft.fragment = "forward"
// CHECK-NEXT:  %[[H0:.*]] = weft.matmul %[[X]], %{{.*}} {weft.fragment = "forward"}
// CHECK-NEXT:  weft.send %[[H0]] {peer = 1 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  %[[DH0:.*]] = weft.recv {peer = 1 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  weft.matmul %[[DH0]]
// CHECK-NEXT:  %[[DW0:.*]] = weft.matmul %[[X]], %[[DH0]]
// CHECK-NEXT:  weft.param_grad "h.0.w", %[[DW0]] {weft.fragment = "backward"}
// CHECK-NEXT:  return{{$}}
//
// The second stage (layers 1 and 2, and the head) receives the first's
// activation, and reads it again in its backward (the weight gradient of
// layer 1) without another transfer.
// CHECK-LABEL: func.func @step_stage1
// CHECK-SAME:  -> tensor<f32> attributes
// CHECK-NOT:   weft.param "h.0.w"
// CHECK:       %[[IN:.*]] = weft.recv {peer = 0 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  weft.matmul %[[IN]], %{{.*}} {weft.fragment = "forward"}
// CHECK:       weft.cross_entropy
// CHECK:       weft.param_grad "h.2.w"
// CHECK-NEXT:  %[[DH0S:.*]] = weft.matmul
// CHECK-NEXT:  %[[DW1:.*]] = weft.matmul %[[IN]], %{{.*}} {transpose_a = true, weft.fragment = "backward"}
// CHECK-NEXT:  weft.param_grad "h.1.w", %[[DW1]]
// CHECK-NEXT:  weft.send %[[DH0S]] {peer = 0 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  return %{{.*}} : tensor<f32>
//
// By default the cut balances the stages' forward FLOPs. The head's matmul
// (16 x 8) costs two layers' (8 x 8), so layer 1 joins the first stage:
// 2 + 2 layers' worth against 1 + 2 (0,1-2 would be 1 against 4).
// BALANCED-LABEL: func.func @step_stage0
// BALANCED-SAME:  weft.stage_layers = "0-1"
// BALANCED:       weft.param "h.1.w"
// BALANCED:       weft.send
// BALANCED-LABEL: func.func @step_stage1
// BALANCED-SAME:  weft.stage_layers = "2"
// BALANCED-NOT:   weft.param "h.1.w"
// BALANCED:       weft.param "h.2.w"
//
// ZB-H1 splits each backward in two: what the gradient sent to the previous
// stage needs stays in "backward" (B), the weight gradients move to
// "weight" (W), which the schedule runs later. The first stage sends no
// gradient: its backward stays whole.
// ZB-LABEL: func.func @step_stage0
// ZB-NOT:   weft.fragment = "weight"
// ZB-LABEL: func.func @step_stage1
// ZB:       %[[DL:.*]] = weft.cross_entropy_grad {{.*}}weft.fragment = "backward"
// ZB-NEXT:  %[[DH2:.*]] = weft.matmul %[[DL]], {{.*}}weft.fragment = "backward"
// ZB-NEXT:  %[[DH1:.*]] = weft.matmul %[[DH2]], {{.*}}weft.fragment = "backward"
// ZB-NEXT:  %[[DH0:.*]] = weft.matmul %[[DH1]], {{.*}}weft.fragment = "backward"
// ZB-NEXT:  weft.send %[[DH0]] {peer = 0 : i64, weft.fragment = "backward"}
// ZB-NEXT:  weft.matmul %[[DL]], {{.*}}weft.fragment = "weight"
// ZB-NEXT:  weft.param_grad "head", {{.*}}weft.fragment = "weight"
// ZB:       weft.param_grad "h.2.w", {{.*}}weft.fragment = "weight"
// ZB:       weft.param_grad "h.1.w", {{.*}}weft.fragment = "weight"
// ZB-NEXT:  return
weft.mesh @mesh {axes = ["pp"], shape = array<i64: 2>}
func.func @step(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @mesh} {
  %e = weft.param "embed" {init = "zeros", weft.layer = -1 : i64} : tensor<16x8xf32>
  %w0 = weft.param "h.0.w" {init = "zeros", weft.layer = 0 : i64} : tensor<8x8xf32>
  %w1 = weft.param "h.1.w" {init = "zeros", weft.layer = 1 : i64} : tensor<8x8xf32>
  %w2 = weft.param "h.2.w" {init = "zeros", weft.layer = 2 : i64} : tensor<8x8xf32>
  %head = weft.param "head" {init = "zeros", weft.layer = 3 : i64} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h0 = weft.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h1 = weft.matmul %h0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h2 = weft.matmul %h1, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %h2, %head {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = weft.fill {value = 1.0 : f64} : tensor<f32>
  %dl = weft.cross_entropy_grad %logits, %targets, %seed : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  %dh2 = weft.matmul %dl, %head : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dhead = weft.matmul %dl, %h2 {transpose_a = true} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  weft.param_grad "head", %dhead : tensor<16x8xf32>
  %dh1 = weft.matmul %dh2, %w2 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw2 = weft.matmul %h1, %dh2 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.2.w", %dw2 : tensor<8x8xf32>
  %dh0 = weft.matmul %dh1, %w1 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw1 = weft.matmul %h0, %dh1 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.1.w", %dw1 : tensor<8x8xf32>
  %dx = weft.matmul %dh0, %w0 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw0 = weft.matmul %x, %dh0 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.0.w", %dw0 : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// A head tied to the embedding reads a parameter of the first stage on the
// last. The last stage holds a replica of it (weft.replica: its value, no
// gradient or Adam state); the first stage trains it and sends its value
// after its optimizer; the last receives it before its own.
// CHECK-LABEL: func.func @tied_stage0
// CHECK:       weft.adamw %[[E:[0-9]+]]
// CHECK:       weft.send %[[E]] {peer = 1 : i64, weft.fragment = "optimizer"} : tensor<16x8xf32>
// CHECK-NEXT:  return
// CHECK-LABEL: func.func @tied_stage1
// CHECK:       %[[R:.*]] = weft.param "embed" {init = "zeros", weft.layer = -1 : i64, weft.replica}
// CHECK:       weft.matmul %{{.*}}, %[[R]] {transpose_b = true, weft.fragment = "forward"}
// CHECK:       weft.recv_param "embed" {peer = 0 : i64, weft.fragment = "optimizer"}
// CHECK-NEXT:  weft.adamw
// CHECK-NOT:   weft.adamw %[[R]]
weft.mesh @mesh {axes = ["pp"], shape = array<i64: 2>}
func.func @tied(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @mesh} {
  %e = weft.param "embed" {init = "zeros", weft.layer = -1 : i64} : tensor<16x8xf32>
  %w0 = weft.param "h.0.w" {init = "zeros", weft.layer = 0 : i64} : tensor<8x8xf32>
  %w1 = weft.param "h.1.w" {init = "zeros", weft.layer = 1 : i64} : tensor<8x8xf32>
  %w2 = weft.param "h.2.w" {init = "zeros", weft.layer = 2 : i64} : tensor<8x8xf32>
  %n = weft.param "norm" {init = "ones", weft.layer = 3 : i64} : tensor<8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h0 = weft.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h1 = weft.matmul %h0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h2 = weft.matmul %h1, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %h2, %e {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  weft.adamw %e {weight_decay = true} : tensor<16x8xf32>
  weft.adamw %w0 {weight_decay = true} : tensor<8x8xf32>
  weft.adamw %w1 {weight_decay = true} : tensor<8x8xf32>
  weft.adamw %w2 {weight_decay = true} : tensor<8x8xf32>
  weft.adamw %n {weight_decay = false} : tensor<8xf32>
  return %loss : tensor<f32>
}

// -----

// Stages are cut by the layers the frontend marks on params.
weft.mesh @mesh {axes = ["pp"], shape = array<i64: 2>}
func.func @unmarked(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @mesh} {
  // expected-error @below {{has no weft.layer: pipeline stages are cut by the layers the frontend marks}}
  %e = weft.param "embed" {init = "zeros"} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %e {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
