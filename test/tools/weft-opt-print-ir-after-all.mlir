// RUN: weft-opt %s -weft-autodiff -weft-propagate-sharding -weft-partition -weft-fold-collectives -mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// Every stage of lowering can be printed and read: after each pass the IR,
// and in it each collective with the reason it exists.
// CHECK:      IR Dump After WeftAutodiff (weft-autodiff)
// CHECK:      weft.cross_entropy_grad
// CHECK:      IR Dump After WeftPropagateSharding (weft-propagate-sharding)
// CHECK:      weft.matmul {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \[\], \["tp"\]\]}}>]
// CHECK:      IR Dump After WeftPartition (weft-partition)
// CHECK:      weft.all_reduce %{{.*}} {axes = ["tp"], reason = "weft.add operand 1: [*, *, *] partial(tp) -> [*, *, *]"}
// CHECK:      IR Dump After WeftFoldCollectives (weft-fold-collectives)
// CHECK:      weft.all_reduce
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @mlp(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %w1 = weft.param "fc.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [[], ["tp"]]>} : tensor<8x32xf32>
  %a = weft.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  %h = weft.gelu %a : tensor<2x4x32xf32>
  %w2 = weft.param "proj.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<32x8xf32>
  %o = weft.matmul %h, %w2 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
  %y = weft.add %x, %o : tensor<2x4x8xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
