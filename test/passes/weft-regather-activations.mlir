// RUN: weft-opt %s -split-input-file -weft-regather-activations | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-regather-activations="parameters=true" | FileCheck %s --check-prefix=PARAMS

// Sequence parallelism: the input of a column-parallel matmul is gathered
// over tp. The forward's matmul reads the gathered copy; the backward's
// weight gradient reads a second gather of the shard, made right before it,
// so the forward's copy is not kept to the backward (Korthikanti et al.
// 2022, section 4.2.2). The input gradient's matmul never read it.
// CHECK-LABEL: func @sequence_parallel
// CHECK:       %[[G:.*]] = weft.all_gather %[[X:.*]] {axes = ["tp"], dim = 1 : i64}
// CHECK-NEXT:  weft.matmul %[[G]], %{{.*}} :
// CHECK:       weft.cross_entropy
// CHECK:       weft.matmul %{{.*}}, %{{.*}} {transpose_b = true}
// CHECK-NEXT:  %[[G2:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 1 : i64, weft.regather}
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
