// RUN: weft-opt %s -split-input-file -weft-propagate-sharding | FileCheck %s
// RUN: weft-opt %s -split-input-file -weft-propagate-sharding -weft-partition | FileCheck %s --check-prefix=PART

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

// -----

// A factor that only a result carries (embedding_grad's vocab) learns its axes
// from the result's users, not from the replicated operands: the table
// gradient is born split by vocab, like the matmul's gradient it is added to.
// Without a user that offers axes it stays replicated (the second grad).
// CHECK-LABEL: func @result_only_factor
// CHECK: weft.embedding_grad {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>]
// CHECK: weft.add {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>]
// CHECK: weft.embedding_grad {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \[\]\]}}>]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @result_only_factor(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>, %dlogits: tensor<2x4x16xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %h = weft.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %dw = weft.matmul %dlogits, %h {transpose_a = true} : (tensor<2x4x16xf32>, tensor<2x4x8xf32>) -> tensor<16x8xf32>
  %sh = weft.shard %dw {sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %de = weft.embedding_grad %dy, %ids {vocab = 16} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  %sum = weft.add %sh, %de : tensor<16x8xf32>
  %other = weft.embedding_grad %dy, %ids {vocab = 16} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  return %sum, %other : tensor<16x8xf32>, tensor<16x8xf32>
}

// -----

// Sequence parallelism on an untied vocab-parallel table (Llama), as Megatron
// lays it out. The lookup contracts the table's split vocab, so its result is
// a partial sum: the constraint after it does not seed it (it would take tp
// for the sequence and gather the table); the partial sum is reduce-scattered
// into the sequence split at partition. The table's gradient takes its
// parameter's split from weft.param_grad, so each rank computes its vocab
// shard from the gathered dy instead of the whole table.
// CHECK-LABEL: func @sequence_parallel_vocab_table
// CHECK: weft.embedding {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \[\], \[\]\]}}>]
// CHECK: weft.shard {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \["tp"\], \[\]\]}}>]
// CHECK: weft.embedding_grad {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>]
// Negative: a constraint on a value no split parameter contracts into (the
// silu) still seeds it, as in @propagate.
// CHECK: weft.silu {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \["tp"\], \[\]\]}}>]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_parallel_vocab_table(%ids: tensor<2x4xi32>, %dy: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %wte = weft.param "embed" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %h = weft.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %c = weft.shard %h {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  %dyc = weft.shard %dy {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  %de = weft.embedding_grad %dyc, %ids {vocab = 16} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  weft.param_grad "embed", %de : tensor<16x8xf32>
  %s = weft.silu %c : tensor<2x4x8xf32>
  %sc = weft.shard %s {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  return %sc : tensor<2x4x8xf32>
}

// -----

// The same under mixed precision: the lookup reads the table's bf16 copy (a
// cast of the parameter), which counts as the parameter. The copy stays
// split like the table and the lookup's result is a partial sum; the whole
// table is not gathered over tp.
// CHECK-LABEL: func @sequence_parallel_bf16_table
// CHECK: weft.cast {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>]
// CHECK: weft.embedding {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \[\], \[\]\]}}>]
// CHECK: weft.shard {{.*}}weft.shardings = [#weft.sharding<dims = {{\[\[\], \["tp"\], \[\]\]}}>]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_parallel_bf16_table(%ids: tensor<2x4xi32>) -> tensor<2x4x8xbf16> {
  %wte = weft.param "embed" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %w16 = weft.cast %wte : tensor<16x8xf32> to tensor<16x8xbf16>
  %h = weft.embedding %w16, %ids : (tensor<16x8xbf16>, tensor<2x4xi32>) -> tensor<2x4x8xbf16>
  %c = weft.shard %h {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xbf16>
  return %c : tensor<2x4x8xbf16>
}

// -----

// A fused bias pins the matmul's contraction (hand-written IR: weft-fuse-bias
// runs after partitioning): a product over half of K each would add the bias
// once per shard. So the row-split weight is gathered and the product is
// whole. Negative: the same matmul without a bias contracts its shard of K
// and all-reduces the partial sum.
// CHECK-LABEL: func @fused_bias_pins_contraction
// PART-LABEL: func @fused_bias_pins_contraction
// PART: %[[W:.*]] = weft.all_gather %{{.*}} {axes = ["tp"], dim = 0 : i64, reason = "weft.matmul operand 1: [tp, *] -> [*, *]"}
// PART-NEXT: %[[Y:.*]] = weft.matmul %{{.*}}, %[[W]], %{{.*}} : (tensor<4x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>)
// PART: weft.slice %{{.*}} {axes = ["tp"], dim = 2
// PART-NEXT: %[[Z:.*]] = weft.matmul {{.*}} : (tensor<4x8x8xf32>, tensor<8x32xf32>)
// PART-NEXT: %[[R:.*]] = weft.all_reduce %[[Z]] {axes = ["tp"]
// PART-NEXT: return %[[Y]], %[[R]]
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @fused_bias_pins_contraction(%x: tensor<4x8x16xf32>) -> (tensor<4x8x32xf32>, tensor<4x8x32xf32>) {
  %w = weft.param "w" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x32xf32>
  %b = weft.param "b" {init = "zeros"} : tensor<32xf32>
  %y = weft.matmul %x, %w, %b : (tensor<4x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<4x8x32xf32>
  %z = weft.matmul %x, %w : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  return %y, %z : tensor<4x8x32xf32>, tensor<4x8x32xf32>
}

// -----

// A base (weft-fuse-table-grad, after partitioning) pins embedding_grad's
// ids: a scatter of half the batch each onto the base would add the base
// once per shard. So the batch-split ids are gathered. Negative: without a
// base each rank scatters its half and the partial tables are all-reduced.
// CHECK-LABEL: func @table_base_pins_ids
// PART-LABEL: func @table_base_pins_ids
// PART: %[[IDS:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64, reason = "weft.embedding_grad operand 1: [dp, *] -> [*, *]"}
// PART-NEXT: %[[G:.*]] = weft.embedding_grad %arg1, %[[IDS]], %arg2 {vocab = 16 : i64} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<16x8xf32>)
// PART: %[[DY:.*]] = weft.slice %arg1 {axes = ["dp"], dim = 0
// PART-NEXT: %[[H:.*]] = weft.embedding_grad %[[DY]], %arg0 {vocab = 16 : i64} : (tensor<1x4x8xf32>, tensor<1x4xi32>)
// PART-NEXT: %[[R:.*]] = weft.all_reduce %[[H]] {axes = ["dp"]
// PART-NEXT: return %[[G]], %[[R]]
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @table_base_pins_ids(%ids: tensor<2x4xi32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}, %dy: tensor<2x4x8xf32>, %base: tensor<16x8xf32>) -> (tensor<16x8xf32>, tensor<16x8xf32>) {
  %g = weft.embedding_grad %dy, %ids, %base {vocab = 16} : (tensor<2x4x8xf32>, tensor<2x4xi32>, tensor<16x8xf32>) -> tensor<16x8xf32>
  %h = weft.embedding_grad %dy, %ids {vocab = 16} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<16x8xf32>
  return %g, %h : tensor<16x8xf32>, tensor<16x8xf32>
}
