// RUN: weft-opt %s -split-input-file -weft-regather-activations | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-regather-activations="parameters=true" | FileCheck %s --check-prefix=PARAMS
// RUN: weft-compile gpt-tiny --mesh tp=2 --layout megatron --sequence-parallel --batch 2 --seq 16 --quiet -o %t.weft
// RUN: weft-run %t.weft --dump | FileCheck %s --check-prefix=PROGRAM

// In the program (gpt-tiny, tp=2, sequence parallel, batch 2): the
// sequence dim is not the outer one, so each second gather runs along dim 0
// into scratch blocks, and a block_transpose puts the sequence together.
// It starts before the input gradient's matmul and is waited for, with its
// transpose, before the next instruction that needs the scratch blocks:
// the input gradient's own transpose for its reduce-scatter, which then
// runs under the weight gradient (weft-overlap-input-gradient-reductions).
// First the LM head's input (the final norm's output; the tied head's
// input gradient reads the table as it is), then the last layer's fc1
// input.
// PROGRAM:      all_gather_start  in={{.*}} out=[[[B0:[0-9]+]]]  axes=[tp]  dim=0  : [2,8,64] -> [4,8,64]
// PROGRAM-NEXT: matmul  in={{.*}}  : [2,16,128] x [128,64] -> [2,16,64]
// PROGRAM-NEXT: wait  in=[[[B0]]]
// PROGRAM:      all_gather_start  in={{.*}} out=[[[B:[0-9]+]]]  axes=[tp]  dim=0  : [2,8,64] -> [4,8,64]
// PROGRAM-NEXT: matmul  in={{.*}} out=[[[DX:[0-9]+]]]  transpose_b=true
// PROGRAM-NEXT: wait  in=[[[B]]]
// PROGRAM-NEXT: block_transpose  in=[[[B]]] out=[[[G:[0-9]+]]]  axes=[tp]
// PROGRAM-NEXT: block_transpose  in=[[[DX]]] out=[[[S:[0-9]+]]]
// PROGRAM-NEXT: reduce_scatter_start  in=[[[S]]] out=[[[R:[0-9]+]]]
// PROGRAM-NEXT: matmul  in=[[[G]],{{[0-9]+}}] out={{.*}}  transpose_a=true
// PROGRAM-NEXT: wait  in=[[[R]]]
// PROGRAM-NEXT: layer_norm_grad  in=[[[R]],

// Sequence parallelism: the input of a column-parallel matmul is gathered
// over tp. The forward's matmul reads the gathered copy; the backward's
// weight gradient reads a second gather of the shard, so the forward's copy
// is not kept to the backward (Korthikanti et al. 2022, section 4.2.2). The
// input gradient's matmul never reads it: the second gather starts before
// that matmul, asynchronously, and completes at the weight gradient, as
// Megatron overlaps it with the input gradient's GEMM.
// CHECK-LABEL: func @sequence_parallel
// CHECK:       %[[G:.*]] = weft.all_gather %[[X:.*]] {axes = ["tp"], dim = 1 : i64}
// CHECK-NEXT:  weft.matmul %[[G]], %{{.*}} :
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[G2:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 1 : i64, weft.async, weft.regather}
// CHECK-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  weft.matmul %[[G2]], %{{.*}} {transpose_a = true}
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_parallel(%x: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x8xf32>
  %g = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %y = weft.matmul %g, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dw = weft.matmul %g, %dy {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "w", %dw : tensor<8x8xf32>
  return %l : tensor<f32>
}

// -----

// Two projections of one gathered input (Llama's q and k): autodiff makes
// k's input and weight gradients, then q's. q's input gradient, and the sum
// of the two, read only what was ready before k's weight gradient, so they
// move ahead of it, and the second gather runs under both input gradients,
// as under one fused GEMM. %dq2 reads k's weight gradient's result and
// stays where it is.
// CHECK-LABEL: func @two_projections
// CHECK:       weft.cross_entropy
// CHECK-NEXT:  %[[G2:.*]] = weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64, weft.async, weft.regather}
// CHECK-NEXT:  %[[DXK:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[DXQ:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  weft.add %[[DXK]], %[[DXQ]]
// CHECK-NEXT:  %[[DWK:.*]] = weft.matmul %[[G2]], %{{.*}} {transpose_a = true}
// CHECK-NEXT:  weft.matmul %{{.*}}, %[[DWK]]
// CHECK-NEXT:  weft.matmul %[[G2]], %{{.*}} {transpose_a = true}
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @two_projections(%x: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dk: tensor<2x4x8xf32>, %dq: tensor<2x4x8xf32>) -> tensor<f32> {
  %wk = weft.param "wk" {init = "zeros"} : tensor<8x8xf32>
  %wq = weft.param "wq" {init = "zeros"} : tensor<8x8xf32>
  %g = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %k = weft.matmul %g, %wk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %q = weft.matmul %g, %wq : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s = weft.add %k, %q : tensor<2x4x8xf32>
  %l = weft.cross_entropy %s, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dxk = weft.matmul %dk, %wk {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dwk = weft.matmul %g, %dk {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  %dxq = weft.matmul %dq, %wq {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dx = weft.add %dxk, %dxq : tensor<2x4x8xf32>
  %dq2 = weft.matmul %dq, %dwk : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %dwq = weft.matmul %g, %dq2 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "wk", %dwk : tensor<8x8xf32>
  weft.param_grad "wq", %dwq : tensor<8x8xf32>
  weft.param_grad "x", %dx : tensor<2x4x8xf32>
  return %l : tensor<f32>
}

// -----

// Negative: with no matmul right before the weight gradient (a GELU of the
// output gradient stands between), the second gather has nothing to overlap
// and is made, blocking, right before its reader.
// CHECK-LABEL: func @nothing_to_overlap
// CHECK:       weft.gelu
// CHECK-NEXT:  %[[G2:.*]] = weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64, weft.regather}
// CHECK-NEXT:  weft.matmul %[[G2]], %{{.*}} {transpose_a = true}
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @nothing_to_overlap(%x: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<8x8xf32>
  %g = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %y = weft.matmul %g, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %l = weft.cross_entropy %y, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %w {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %d2 = weft.gelu %dy : tensor<2x4x8xf32>
  %dw = weft.matmul %g, %d2 {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  weft.param_grad "w", %dw : tensor<8x8xf32>
  return %l : tensor<f32>
}

// -----

// Negative: a parameter's gather (ZeRO-3) is not an activation's, a gather
// only the forward reads has nothing to gather again, and one another
// backward op reads too (%s, an add) would be kept anyway; all stay as they
// are.
// CHECK-LABEL: func @parameters_and_forward_only
// CHECK-NOT:   weft.regather
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @parameters_and_forward_only(%x: tensor<2x2x8xf32>, %targets: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<4x8xf32>
  %wg = weft.all_gather %w {axes = ["dp"], dim = 0 : i64} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %g = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %h = weft.all_gather %x {axes = ["tp"], dim = 1 : i64} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
  %z = weft.gelu %h : tensor<2x4x8xf32>
  %y = weft.matmul %g, %wg : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %yz = weft.add %y, %z : tensor<2x4x8xf32>
  %l = weft.cross_entropy %yz, %targets {denominator = 8 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dx = weft.matmul %dy, %wg {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s = weft.add %h, %dy : tensor<2x4x8xf32>
  %dv = weft.matmul %h, %s {transpose_a = true} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<8x8xf32>
  return %l : tensor<f32>
}

// -----

// ZeRO-3 gathered per micro-batch (`parameters`, --zero3-gather
// microbatch): the forward's matmul and the backward's input-gradient
// matmul read the bf16 copy of %w's dp-gather. With another matmul between
// them, the backward gathers and casts %w again, so the forward's copy is
// not held to the backward (FSDP's reshard after forward). The head's
// copy %hc is read right before the loss and right after it, with no
// matmul between: it is kept. Without `parameters` nothing changes here:
// the CHECK-NOT of the case above reaches to the end of the output.
// PARAMS-LABEL: func @zero3_parameters
// PARAMS:       %[[G:.*]] = weft.all_gather %[[W:.*]] {axes = ["dp"], dim = 0 : i64, weft.async}
// PARAMS-NEXT:  %[[C:.*]] = weft.cast %[[G]]
// PARAMS:       weft.cross_entropy_grad
// PARAMS-NEXT:  weft.matmul %{{.*}}, %[[HC:.*]] :
// PARAMS-NEXT:  weft.matmul %{{.*}}, %{{.*}} {transpose_a = true}
// PARAMS-NEXT:  %[[G2:.*]] = weft.all_gather %[[W]] {axes = ["dp"], dim = 0 : i64, weft.async, weft.regather}
// PARAMS-NEXT:  %[[C2:.*]] = weft.cast %[[G2]]
// PARAMS-NEXT:  weft.matmul %{{.*}}, %[[C2]] {transpose_b = true}
// PARAMS-NOT:   weft.regather
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero3_parameters(%x: tensor<2x4x8xbf16>, %targets: tensor<2x4xi32>, %dl: tensor<2x4x16xbf16>, %dy: tensor<2x4x8xbf16>) -> tensor<f32> {
  %w = weft.param "w" {init = "zeros"} : tensor<4x8xf32>
  %g = weft.all_gather %w {axes = ["dp"], dim = 0 : i64, weft.async} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %c = weft.cast %g : tensor<8x8xf32> to tensor<8x8xbf16>
  %h = weft.param "h" {init = "zeros"} : tensor<8x16xf32>
  %hg = weft.all_gather %h {axes = ["dp"], dim = 0 : i64, weft.async} : (tensor<8x16xf32>) -> tensor<16x16xf32>
  %hc = weft.cast %hg : tensor<16x16xf32> to tensor<16x16xbf16>
  %y = weft.matmul %x, %c : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %y2 = weft.matmul %y, %c : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %yy = weft.concat %y2, %y2 {dim = 2 : i64} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<2x4x16xbf16>
  %z = weft.matmul %yy, %hc : (tensor<2x4x16xbf16>, tensor<16x16xbf16>) -> tensor<2x4x16xbf16>
  %l = weft.cross_entropy %z, %targets {denominator = 8 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  %dz = weft.cross_entropy_grad %z, %targets, %l {denominator = 8 : i64} : (tensor<2x4x16xbf16>, tensor<2x4xi32>, tensor<f32>) -> tensor<2x4x16xbf16>
  %dyy = weft.matmul %dz, %hc : (tensor<2x4x16xbf16>, tensor<16x16xbf16>) -> tensor<2x4x16xbf16>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) -> tensor<8x8xbf16>
  %dx = weft.matmul %dy, %c {transpose_b = true} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  return %l : tensor<f32>
}
