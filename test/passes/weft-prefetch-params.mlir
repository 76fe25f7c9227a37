// RUN: weft-opt %s -split-input-file -weft-prefetch-params="distance=2" | FileCheck %s

// A ZeRO-3 gather starts two ops before its use (asynchronously), but never
// above the parameter it gathers. Other gathers are left alone.
// CHECK-LABEL: func @prefetch
// CHECK:      %[[W:.*]] = weft.param "w"
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[W]] {axes = ["dp"], dim = 0 : i64, weft.async}
// CHECK-NEXT: weft.gelu
// CHECK-NEXT: weft.silu
// CHECK-NEXT: weft.matmul %{{.*}}, %[[G]]
// CHECK:      weft.all_gather %{{.*}} {axes = ["dp"], dim = 0 : i64} : (tensor<2x4x8xf32>)
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @prefetch(%x: tensor<2x4x8xf32>) -> tensor<4x4x8xf32> {
  %a = weft.gelu %x : tensor<2x4x8xf32>
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x8xf32>
  %b = weft.gelu %a : tensor<2x4x8xf32>
  %c = weft.silu %b : tensor<2x4x8xf32>
  %wg = weft.all_gather %w {axes = ["dp"], dim = 0} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %y = weft.matmul %c, %wg : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %g = weft.all_gather %y {axes = ["dp"], dim = 0} : (tensor<2x4x8xf32>) -> tensor<4x4x8xf32>
  return %g : tensor<4x4x8xf32>
}

// -----

// A layer's bucketed gather (weft-bucket-gradients: its parameters packed,
// one all-gather, a blocked unpack at the first use) moves up with its pack,
// never above a parameter the pack reads; the unpack, where the gather is
// waited for, stays at the use.
// CHECK-LABEL: func @prefetch_bucket
// CHECK:      %[[V:.*]] = weft.param "v"
// CHECK-NEXT: %[[P:.*]] = weft.pack %{{.*}}, %[[V]]
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[P]] {axes = ["dp"], dim = 0 : i64, weft.async}
// CHECK-NEXT: weft.gelu
// CHECK-NEXT: weft.silu
// CHECK-NEXT: %[[U:.*]]:2 = weft.unpack %[[G]] {blocks = 2 : i64}
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @prefetch_bucket(%x: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<4x8xf32>
  %a = weft.gelu %x : tensor<2x4x8xf32>
  %v = weft.param "v" {init = "normal", std = 0.02} : tensor<4x8xf32>
  %b = weft.gelu %a : tensor<2x4x8xf32>
  %c = weft.silu %b : tensor<2x4x8xf32>
  %p = weft.pack %w, %v : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<64xf32>
  %g = weft.all_gather %p {axes = ["dp"], dim = 0} : (tensor<64xf32>) -> tensor<128xf32>
  %u:2 = weft.unpack %g {blocks = 2} : (tensor<128xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
  %y = weft.matmul %c, %u#0 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %z = weft.matmul %y, %u#1 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  return %z : tensor<2x4x8xf32>
}
