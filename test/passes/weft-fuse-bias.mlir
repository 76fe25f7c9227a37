// RUN: weft-opt %s -split-input-file -weft-fuse-bias | FileCheck %s

// A linear layer: the bias_add becomes the matmul's third operand, where
// the add stood (a ZeRO-3 bias is gathered between the two), with the
// ops' marks.
// CHECK-LABEL: func @linear
// CHECK-NOT:  weft.bias_add
// CHECK:      %[[G:.*]] = weft.all_gather %arg2
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %arg0, %arg1, %[[G]] {transpose_b = true, weft.fragment = "forward"} : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: weft.gelu %[[Y]]
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @linear(%x: tensor<2x4x8xf32>, %w: tensor<6x8xf32>, %b: tensor<3xf32>) -> tensor<2x4x6xf32> {
  %m = weft.matmul %x, %w {transpose_b = true, weft.fragment = "forward"} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %bg = weft.all_gather %b {axes = ["dp"], dim = 0, weft.fragment = "forward"} : (tensor<3xf32>) -> tensor<6xf32>
  %y = weft.bias_add %m, %bg {weft.fragment = "forward"} : (tensor<2x4x6xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %z = weft.gelu %y {weft.fragment = "forward"} : tensor<2x4x6xf32>
  return %z : tensor<2x4x6xf32>
}

// -----

// Left alone: a row-parallel layer (its all-reduce stands between, so the
// bias is added once, to the sum); a product read twice (the bias_add must
// not change what the other reader sees); a bf16 product (rounded to bf16
// before the add); ops of different fragments.
// CHECK-LABEL: func @not_fused
// CHECK-COUNT-4: weft.bias_add
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @not_fused(%x: tensor<4x8xf32>, %w: tensor<8x6xf32>, %b: tensor<6xf32>,
                     %xh: tensor<4x8xbf16>, %wh: tensor<8x6xbf16>, %bh: tensor<6xbf16>)
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xbf16>, tensor<4x6xf32>) {
  %m1 = weft.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %r1 = weft.all_reduce %m1 {axes = ["tp"]} : (tensor<4x6xf32>) -> tensor<4x6xf32>
  %y1 = weft.bias_add %r1, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %m2 = weft.matmul %x, %w : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %y2 = weft.bias_add %m2, %b : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  %m3 = weft.matmul %xh, %wh : (tensor<4x8xbf16>, tensor<8x6xbf16>) -> tensor<4x6xbf16>
  %y3 = weft.bias_add %m3, %bh : (tensor<4x6xbf16>, tensor<6xbf16>) -> tensor<4x6xbf16>
  %m4 = weft.matmul %x, %w {weft.fragment = "forward"} : (tensor<4x8xf32>, tensor<8x6xf32>) -> tensor<4x6xf32>
  %y4 = weft.bias_add %m4, %b {weft.fragment = "backward"} : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %y1, %y2, %m2, %y3, %y4 : tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xbf16>, tensor<4x6xf32>
}
