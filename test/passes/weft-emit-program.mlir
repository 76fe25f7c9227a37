// The program file is read back by the runtime's loader and printed.
// RUN: weft-opt %s -split-input-file -weft-autodiff -weft-insert-adamw -weft-plan-memory -weft-emit-program="output=%t.weft" -verify-diagnostics -o /dev/null
// RUN: weft-run %t.weft --dump | FileCheck %s

// CHECK:      program: model tiny | dtype f32 | batch 2 | seq 4 | vocab 16
// CHECK:      params: 2 (136 elements)
// CHECK-NEXT:   0  wte  [16,8]  init=normal(std=0.02)  decay
// CHECK-NEXT:   1  g  [8]  init=ones
// CHECK:        0  input  i32[2,4]  tokens
// CHECK-NEXT:   1  input  i32[2,4]  targets
// CHECK-NEXT:   2  param  f32[16,8]  wte
// CHECK-NEXT:   3  grad  f32[16,8]  wte
// CHECK-NEXT:   4  adam_m  f32[16,8]  wte
// CHECK-NEXT:   5  adam_v  f32[16,8]  wte
// CHECK:      microbatches: 1
// CHECK-NEXT: instructions: 13 (loss = buffer 13)
// CHECK-NEXT:  -- fragment forward [0, 4), per micro-batch
// CHECK-NEXT:   0  embedding  in=[2,0] out=[10]
// CHECK-NEXT:   1  rms_norm  in=[10,6] out=[11]  eps=1e-05
// CHECK-NEXT:   2  matmul  in=[11,2] out=[12]  transpose_b=true  : [2,4,8] x [16,8] -> [2,4,16]
// CHECK-NEXT:   3  cross_entropy  in=[12,1] out=[13]
// CHECK-NEXT:  -- fragment backward [4, 11), per micro-batch
// Gradients are written straight into the parameters' grad buffers (3 and 7),
// with no copy...
// CHECK:        8  rms_norm_grad  in=[16,10,6] out=[18,7]
// CHECK:       10  add  in=[17,19] out=[3]
// CHECK-NEXT:  -- fragment optimizer [11, 13)
// ...which the in-place AdamW updates read.
// CHECK-NEXT:  11  adamw  in=[2,3,4,5] out=[2,4,5]  weight_decay=true
// CHECK-NEXT:  12  adamw  in=[6,7,8,9] out=[6,8,9]  weight_decay=false
// One micro-batch: no prologue fragment, each step stores its gradients.
// CHECK-NEXT: schedule: forward(0) backward(0) optimizer

// Two micro-batches, each the function's 2 rows: the step's batch is 4; a
// prologue fragment clears the gradients, each micro-batch adds its own,
// and the cross-entropy divides by the step's 16 rows.
// RUN: weft-opt %s -split-input-file -weft-autodiff -weft-insert-adamw -weft-accumulate-gradients=microbatches=2 -weft-store-gradients-early -weft-plan-memory -weft-emit-program="output=%t.mb.weft" -o /dev/null
// RUN: weft-run %t.mb.weft --dump | FileCheck %s --check-prefix=MB
// MB:      program: model tiny | dtype f32 | batch 4 | seq 4
// MB:      microbatches: 2
// MB:       -- fragment prologue [0, 2)
// MB-NEXT:   0  fill  in=[] out=[{{3|7}}]  value=0
// MB-NEXT:   1  fill  in=[] out=[{{3|7}}]  value=0
// MB-NEXT:  -- fragment forward [2, 6), per micro-batch
// MB:          cross_entropy  in=[{{[0-9]+}},1] out=[{{[0-9]+}}]  denominator=16
// Each gradient is added to its grad buffer as soon as it is made (the
// norm weight's before the embedding's gradient is computed), not all at
// the end of the backward.
// MB:          rms_norm_grad  in={{.*}} out=[{{[0-9]+}},[[G:[0-9]+]]]
// MB-NEXT:     accumulate  in=[[[G]]] out=[7]
// MB-NEXT:     embedding_grad
// MB:          accumulate  in={{.*}} out=[3]
// MB-NEXT:  -- fragment optimizer
// MB:      schedule: prologue forward(0) backward(0) forward(1) backward(1) optimizer

func.func @tiny(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.model = "tiny"} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %h = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Negative: emission needs the memory plan.
// RUN: not weft-opt %s -weft-emit-program="output=%t.bad" 2>&1 | FileCheck %s --check-prefix=UNPLANNED
// UNPLANNED: error: no weft.arena_bytes: run weft-plan-memory first
