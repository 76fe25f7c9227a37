// RUN: weft-opt %s -split-input-file -weft-overlap-input-gradient-reductions | FileCheck %s
// RUN: weft-compile gpt-tiny --mesh tp=2 --layout megatron --batch 2 --seq 16 --quiet -o %t.weft
// RUN: weft-run %t.weft --dump | FileCheck %s --check-prefix=PROGRAM

// Tensor parallelism (Megatron, no sequence parallelism): the input
// gradient of a column-parallel matmul is a partial sum over tp. Its
// all-reduce moves right after the matmul that makes it and starts
// asynchronously; the weight gradient's matmul runs while it is in flight,
// and the norm's gradient, its first reader, completes it.
// CHECK-LABEL: func @column_parallel
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[DX:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[R:.*]] = weft.all_reduce %[[DX]] {axes = ["tp"], weft.async}
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.rms_norm_grad %[[R]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @column_parallel(%x: tensor<2x4x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x4xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %r = weft.all_reduce %dx {axes = ["tp"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dn:2 = weft.rms_norm_grad %r, %x, %g {eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  weft.param_grad "w", %dw : tensor<8x4xf32>
  weft.param_grad "g", %dn#1 : tensor<8xf32>
  return %l : tensor<f32>
}

// -----

// Sequence parallelism: the input gradient is reduce-scattered over tp
// along the sequence instead; the same move.
// CHECK-LABEL: func @sequence_parallel
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[DX:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[R:.*]] = weft.reduce_scatter %[[DX]] {axes = ["tp"], dim = 1 : i64, weft.async}
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.rms_norm_grad %[[R]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_parallel(%x: tensor<2x4x8xf32>, %xs: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x4xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %r = weft.reduce_scatter %dx {axes = ["tp"], dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
  %dn:2 = weft.rms_norm_grad %r, %xs, %g {eps = 1.0e-5} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>, tensor<8xf32>) -> (tensor<2x2x8xf32>, tensor<8xf32>)
  weft.param_grad "w", %dw : tensor<8x4xf32>
  weft.param_grad "g", %dn#1 : tensor<8xf32>
  return %l : tensor<f32>
}

// -----

// Two projections of one input (Llama's k and q): autodiff makes k's input
// and weight gradients, then q's, then their sum. The all-reduce of the sum
// moves right after it, and both weight gradients after the all-reduce.
// CHECK-LABEL: func @two_projections
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[DXK:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[DXQ:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[S:.*]] = weft.add %[[DXK]], %[[DXQ]]
// CHECK-NEXT:  %[[R:.*]] = weft.all_reduce %[[S]] {axes = ["tp"], weft.async}
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.rms_norm_grad %[[R]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @two_projections(%x: tensor<2x4x8xf32>, %targets: tensor<2x4xi32>, %dk: tensor<2x4x4xf32>, %dq: tensor<2x4x4xf32>) -> tensor<f32> {
  %wk = weft.param "wk" {init = "zeros"} : tensor<8x4xf32>
  %wq = weft.param "wq" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %k = weft.matmul %x, %wk : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %q = weft.matmul %x, %wq : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %y = weft.add %k, %q : tensor<2x4x4xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dxk = weft.matmul %dk, %wk {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %dwk = weft.matmul %x, %dk {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %dxq = weft.matmul %dq, %wq {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %dwq = weft.matmul %x, %dq {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %s = weft.add %dxk, %dxq : tensor<2x4x8xf32>
  %r = weft.all_reduce %s {axes = ["tp"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %dn:2 = weft.rms_norm_grad %r, %x, %g {eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
  weft.param_grad "wk", %dwk : tensor<8x4xf32>
  weft.param_grad "wq", %dwq : tensor<8x4xf32>
  weft.param_grad "g", %dn#1 : tensor<8xf32>
  return %l : tensor<f32>
}

// -----

// Negative: the forward's all-reduce (a row-parallel output, read next),
// one with no matmul before its first reader (nothing to overlap), and a
// parameter's gradient's (weft-bucket-gradients buckets those) stay as
// they are.
// CHECK-LABEL: func @nothing_to_overlap
// CHECK-NOT:   weft.async
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @nothing_to_overlap(%x: tensor<2x4x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x4xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x4xf32>
  %p = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %y = weft.all_reduce %p {axes = ["tp"]} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %r = weft.all_reduce %dx {axes = ["tp"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = weft.gelu %r : tensor<2x4x8xf32>
  %dw = weft.matmul %s, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %dx2 = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %dwr = weft.all_reduce %dw {axes = ["tp"]} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  weft.param_grad "w", %dwr : tensor<8x4xf32>
  weft.param_grad "x", %dx2 : tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// -----

// A weight gradient that reads what was made after the input gradient (an
// input gathered over the sequence, as a layout that splits the tokens over
// tp makes) stays after that value: the reduction moves up to its input
// gradient, and the matmul still runs under it where it was.
// CHECK-LABEL: func @reads_a_later_gather
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[DX:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[R:.*]] = weft.reduce_scatter %[[DX]] {axes = ["tp"], dim = 1 : i64, weft.async}
// CHECK-NEXT:  %[[X:.*]] = weft.all_gather
// CHECK-NEXT:  weft.matmul %[[X]], %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.rms_norm_grad %[[R]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @reads_a_later_gather(%x: tensor<2x4x8xf32>, %xs: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x4xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x4xf32>
  %g = weft.param "g" {init = "ones"} : tensor<8xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x4xf32>, tensor<8x4xf32>) -> tensor<2x4x8xf32>
  %xg = weft.all_gather %xs {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %dw = weft.matmul %xg, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>) -> tensor<8x4xf32>
  %r = weft.reduce_scatter %dx {axes = ["tp"], dim = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
  %dn:2 = weft.rms_norm_grad %r, %xs, %g {eps = 1.0e-5} : (tensor<2x2x8xf32>, tensor<2x2x8xf32>, tensor<8xf32>) -> (tensor<2x2x8xf32>, tensor<8xf32>)
  weft.param_grad "w", %dw : tensor<8x4xf32>
  weft.param_grad "g", %dn#1 : tensor<8xf32>
  return %l : tensor<f32>
}

// In the program (gpt-tiny on tp=2): the fc1 input gradient's all-reduce
// starts right after its matmul and is waited for after the weight
// gradient, right before the layer norm's gradient reads it.
// PROGRAM:      matmul  in={{.*}} out=[[[DX:[0-9]+]]]  transpose_b=true  : [2,16,128] x [64,128] -> [2,16,64]
// PROGRAM-NEXT: all_reduce_start  in=[[[DX]]] out=[[[R:[0-9]+]]]  axes=[tp]
// PROGRAM-NEXT: matmul  in={{.*}}  transpose_a=true  : [2,16,64] x [2,16,128] -> [64,128]
// PROGRAM-NEXT: wait  in=[[[R]]]
// PROGRAM-NEXT: layer_norm_grad  in=[[[R]],
