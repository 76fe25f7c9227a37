// RUN: weft-opt %s -split-input-file -weft-fuse-table-grad | FileCheck %s

// A tied table: the head's weight gradient plus the table's scatter
// becomes one embedding_grad with the head's gradient as its base, where
// the add stood, with the ops' marks. Either operand order.
// CHECK-LABEL: func @tied
// CHECK-NOT:  weft.add
// CHECK:      %[[H:.*]] = weft.matmul
// CHECK-NEXT: %[[G:.*]] = weft.embedding_grad %arg0, %arg1, %[[H]] {vocab = 32 : i64, weft.fragment = "backward"} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<32x8xf32>) -> tensor<32x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @tied(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>, %dl: tensor<2x4x32xf32>, %x: tensor<2x4x8xf32>) -> tensor<32x8xf32> {
  %e = weft.embedding_grad %dy, %ids {vocab = 32 : i64, weft.fragment = "backward"} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<32x8xf32>
  %h = weft.matmul %dl, %x {transpose_a = true, weft.fragment = "backward"} : (tensor<2x4x32xf32>, tensor<2x4x8xf32>) -> tensor<32x8xf32>
  %g = weft.add %e, %h {weft.fragment = "backward"} : tensor<32x8xf32>
  return %g : tensor<32x8xf32>
}

// -----

// Left alone: a scatter read twice (the other reader needs it alone); a
// bf16 table (the add rounds its sum); ops of different fragments; an add
// of the scatter to itself.
// CHECK-LABEL: func @not_fused
// CHECK-COUNT-4: weft.add
func.func @not_fused(%dy: tensor<2x4x8xf32>, %ids: tensor<2x4xi32>, %h: tensor<32x8xf32>,
                     %dyh: tensor<2x4x8xbf16>, %hh: tensor<32x8xbf16>)
    -> (tensor<32x8xf32>, tensor<32x8xf32>, tensor<32x8xbf16>, tensor<32x8xf32>, tensor<32x8xf32>) {
  %e1 = weft.embedding_grad %dy, %ids {vocab = 32 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<32x8xf32>
  %g1 = weft.add %h, %e1 : tensor<32x8xf32>
  %e2 = weft.embedding_grad %dyh, %ids {vocab = 32 : i64} : (tensor<2x4x8xbf16>, tensor<2x4xi32>) -> tensor<32x8xbf16>
  %g2 = weft.add %hh, %e2 : tensor<32x8xbf16>
  %e3 = weft.embedding_grad %dy, %ids {vocab = 32 : i64, weft.fragment = "backward"} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<32x8xf32>
  %g3 = weft.add %h, %e3 {weft.fragment = "optimizer"} : tensor<32x8xf32>
  %e4 = weft.embedding_grad %dy, %ids {vocab = 32 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<32x8xf32>
  %g4 = weft.add %e4, %e4 : tensor<32x8xf32>
  return %g1, %e1, %g2, %g3, %g4 : tensor<32x8xf32>, tensor<32x8xf32>, tensor<32x8xbf16>, tensor<32x8xf32>, tensor<32x8xf32>
}
