// RUN: weft-opt %s -split-input-file -weft-cut-stages="stages=2 schedule=interleaved:2 boundaries=0,1,2,3" -verify-diagnostics | FileCheck %s

// Interleaved 1F1B over 2 stages of 2 model chunks each: four layers make
// four virtual stages, and rank r holds chunks r and r+2 (weft.stage_layers
// "0,2" and "1,3"). Every op of a forward or backward fragment names its
// local chunk; a rank's ops run its chunks' forwards in order, then their
// backwards in reverse. Each value goes to the next virtual stage: stage 0
// sends layer 0's output to stage 1 (its chunk 0) and receives layer 1's
// for its chunk 1, which sends layer 2's back to stage 1's chunk 1.
//
// CHECK-LABEL: func.func @step_stage0
// CHECK-SAME:  weft.pipeline_schedule = #weft.schedule<kind = "interleaved", virtual_stages = 2>, weft.stage = 0 : i64, weft.stage_layers = "0,2"
// CHECK:       %[[X:.*]] = weft.embedding {{.*}}{weft.chunk = 0 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  %[[H0:.*]] = weft.matmul %[[X]]
// CHECK-NEXT:  weft.send %[[H0]] {peer = 1 : i64, weft.chunk = 0 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  %[[H1:.*]] = weft.recv {peer = 1 : i64, weft.chunk = 1 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  %[[H2:.*]] = weft.matmul %[[H1]], %{{.*}} {weft.chunk = 1 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  weft.send %[[H2]] {peer = 1 : i64, weft.chunk = 1 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  %[[DH2:.*]] = weft.recv {peer = 1 : i64, weft.chunk = 1 : i64, weft.fragment = "backward"}
// CHECK:       weft.param_grad "h.2.w", {{.*}}weft.chunk = 1 : i64
// CHECK-NEXT:  weft.send {{.*}}{peer = 1 : i64, weft.chunk = 1 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  %[[DH0:.*]] = weft.recv {peer = 1 : i64, weft.chunk = 0 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  weft.matmul %[[X]], %[[DH0]] {transpose_a = true, weft.chunk = 0 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  weft.param_grad "h.0.w"
// CHECK-NEXT:  return{{$}}
//
// The last stage's chunk 1 holds layer 3, the head and the loss.
// CHECK-LABEL: func.func @step_stage1
// CHECK-SAME:  weft.stage = 1 : i64, weft.stage_layers = "1,3"
// CHECK:       weft.recv {peer = 0 : i64, weft.chunk = 0 : i64, weft.fragment = "forward"}
// CHECK:       weft.send {{.*}}{peer = 0 : i64, weft.chunk = 0 : i64, weft.fragment = "forward"}
// CHECK-NEXT:  weft.recv {peer = 0 : i64, weft.chunk = 1 : i64, weft.fragment = "forward"}
// CHECK:       weft.cross_entropy {{.*}}weft.chunk = 1 : i64, weft.fragment = "forward"
// CHECK:       weft.param_grad "head"
// CHECK:       weft.param_grad "h.3.w"
// CHECK-NEXT:  weft.send {{.*}}{peer = 0 : i64, weft.chunk = 1 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  weft.recv {peer = 0 : i64, weft.chunk = 0 : i64, weft.fragment = "backward"}
// CHECK:       weft.param_grad "h.1.w"
// CHECK-NEXT:  weft.send {{.*}}{peer = 0 : i64, weft.chunk = 0 : i64, weft.fragment = "backward"}
// CHECK-NEXT:  return %{{.*}} : tensor<f32>
weft.mesh @mesh {axes = ["pp"], shape = array<i64: 2>}
func.func @step(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @mesh, weft.microbatches = 2 : i64} {
  %e = weft.param "embed" {init = "zeros", weft.layer = -1 : i64} : tensor<16x8xf32>
  %w0 = weft.param "h.0.w" {init = "zeros", weft.layer = 0 : i64} : tensor<8x8xf32>
  %w1 = weft.param "h.1.w" {init = "zeros", weft.layer = 1 : i64} : tensor<8x8xf32>
  %w2 = weft.param "h.2.w" {init = "zeros", weft.layer = 2 : i64} : tensor<8x8xf32>
  %w3 = weft.param "h.3.w" {init = "zeros", weft.layer = 3 : i64} : tensor<8x8xf32>
  %head = weft.param "head" {init = "zeros", weft.layer = 4 : i64} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %h0 = weft.matmul %x, %w0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h1 = weft.matmul %h0, %w1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h2 = weft.matmul %h1, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %h3 = weft.matmul %h2, %w3 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %h3, %head {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = weft.fill {value = 1.0 : f64} : tensor<f32>
  %dl = weft.cross_entropy_grad %logits, %targets, %seed : (tensor<2x4x16xf32>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xf32>
  %dh3 = weft.matmul %dl, %head : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %dhead = weft.matmul %dl, %h3 {transpose_a = true} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  weft.param_grad "head", %dhead : tensor<16x8xf32>
  %dh2 = weft.matmul %dh3, %w3 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw3 = weft.matmul %h2, %dh3 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.3.w", %dw3 : tensor<8x8xf32>
  %dh1 = weft.matmul %dh2, %w2 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw2 = weft.matmul %h1, %dh2 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.2.w", %dw2 : tensor<8x8xf32>
  %dh0 = weft.matmul %dh1, %w1 {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw1 = weft.matmul %h0, %dh1 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.1.w", %dw1 : tensor<8x8xf32>
  %dw0 = weft.matmul %x, %dh0 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "h.0.w", %dw0 : tensor<8x8xf32>
  return %loss : tensor<f32>
}

// -----

// Micro-batches run in rounds of the pipeline's stages.
weft.mesh @mesh {axes = ["pp"], shape = array<i64: 2>}
// expected-error @below {{the interleaved schedule runs micro-batches in rounds of the pipeline's 2 stages: 3 micro-batches is not a multiple of 2}}
func.func @odd(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @mesh, weft.microbatches = 3 : i64} {
  %e = weft.param "embed" {init = "zeros", weft.layer = -1 : i64} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %e {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
