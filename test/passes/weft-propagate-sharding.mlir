// RUN: weft-opt %s -weft-propagate-sharding | FileCheck %s

// From two annotations (the batch split over dp, the weight's output features
// over tp) the op rules give every value a sharding: the matmul result takes
// both factors, the elementwise gelu follows it, the contracted weight
// gradient keeps tp on its output features.
// CHECK-LABEL: func @propagate
// CHECK: weft.matmul {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["dp"\], \[\], \["tp"\]\]}}>]
// CHECK: weft.gelu {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["dp"\], \[\], \["tp"\]\]}}>]
// CHECK: weft.matmul {{.*}}transpose_a = true, weft.shardings = [#weft.sharding<dims = {{\[\[\], \["tp"\]\]}}>]
// A sharding constraint wins over what its operand would get otherwise, and
// flows backwards to it.
// CHECK: weft.silu {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["dp"\], \["tp"\], \[\]\]}}>]
// CHECK: weft.shard
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @propagate(%x: tensor<4x8x16xf32> {weft.sharding = #weft.sharding<dims = [["dp"], [], []]>}, %dy: tensor<4x8x32xf32>) -> tensor<4x8x16xf32> {
  %w = weft.param "w" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [[], ["tp"]]>} : tensor<16x32xf32>
  %y = weft.matmul %x, %w : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %g = weft.gelu %y : tensor<4x8x32xf32>
  %dw = weft.matmul %x, %g {transpose_a = true} : (tensor<4x8x16xf32>, tensor<4x8x32xf32>) -> tensor<16x32xf32>
  %s = weft.silu %x : tensor<4x8x16xf32>
  %c = weft.shard %s {sharding = #weft.sharding<dims = [["dp"], ["tp"], []]>} : tensor<4x8x16xf32>
  return %c : tensor<4x8x16xf32>
}
