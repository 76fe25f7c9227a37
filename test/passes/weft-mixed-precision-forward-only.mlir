// RUN: weft-opt %s -weft-mixed-precision="dtype=bf16" | FileCheck %s

// A forward-only function (weft-return-logits) returns its logits: computed
// in bf16, widened to f32 before the return (exact), so the program's
// output has the program's float dtype.
// CHECK-LABEL: func @forward
// CHECK-SAME:  -> tensor<2x4x16xf32>
// CHECK:       %[[L:.*]] = weft.matmul {{.*}} -> tensor<2x4x16xbf16>
// CHECK-NEXT:  %[[W:.*]] = weft.cast %[[L]] : tensor<2x4x16xbf16> to tensor<2x4x16xf32>
// CHECK-NEXT:  return %[[W]] : tensor<2x4x16xf32>
func.func @forward(%tokens: tensor<2x4xi32>) -> tensor<2x4x16xf32> attributes {weft.vocab = 16 : i64} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  return %logits : tensor<2x4x16xf32>
}
