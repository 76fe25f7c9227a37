// RUN: weft-opt %s -split-input-file -weft-autodiff -weft-propagate-sharding -weft-partition -verify-diagnostics | FileCheck %s

// Megatron MLP: column-parallel fc (split output features), row-parallel proj
// (split input features). One all-reduce in forward (the row-parallel output,
// before the residual add) and one in backward (the input gradient of the
// column-parallel layer); the sharded weights' gradients need none.
// CHECK-LABEL: func @megatron_mlp
// CHECK:       weft.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK:       %[[PARTIAL:.*]] = weft.matmul %{{.*}}, %{{.*}} : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:  weft.all_reduce %[[PARTIAL]] {axes = ["tp"], reason = "weft.add operand 1: [*, *, *] partial(tp) -> [*, *, *]"}
// A replicated vocab keeps the plain cross-entropy.
// CHECK:       weft.cross_entropy_grad
// CHECK-COUNT-1: weft.all_reduce
// CHECK-NOT:   weft.all_reduce
// CHECK-NOT:   weft.all_gather
// CHECK:       return
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @megatron_mlp(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
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

// -----

// Vocab parallelism (Megatron's vocab-parallel embedding and cross-entropy):
// the tied table splits its vocab over tp. The lookup leaves a partial sum
// (ids outside a rank's shard read zeros), all-reduced once; the logits come
// out split by vocab; the loss needs only every shard's softmax statistics
// (max, sum of exponentials, target logit), one small all_gather that the
// gradient reuses. The table's gradients are computed shard by shard.
// CHECK-LABEL: func @vocab_parallel
// CHECK:       weft.embedding %{{.*}}, %{{.*}} {vocab_axes = ["tp"]} : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:  weft.param "ln.weight"
// CHECK-NEXT:  weft.all_reduce %{{.*}} {axes = ["tp"], reason = "weft.rms_norm operand 0: [*, *, *] partial(tp) -> [*, *, *]"}
// CHECK:       %[[LOGITS:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:  %[[LOCAL:.*]] = weft.cross_entropy_stats %[[LOGITS]], %{{.*}} {vocab_axes = ["tp"]} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<1x2x4x3xf32>
// CHECK-NEXT:  %[[STATS:.*]] = weft.all_gather %[[LOCAL]] {axes = ["tp"], dim = 0 : i64, reason = "vocab-parallel cross-entropy: every vocab shard's softmax statistics"} : (tensor<1x2x4x3xf32>) -> tensor<2x2x4x3xf32>
// CHECK-NEXT:  weft.cross_entropy_from_stats %[[STATS]] {denominator = 8 : i64} : (tensor<2x2x4x3xf32>) -> tensor<f32>
// CHECK-NOT:   weft.all_gather
// CHECK:       weft.cross_entropy_stats_grad %[[LOGITS]], %{{.*}}, %[[STATS]], %{{.*}} {denominator = 8 : i64, vocab_axes = ["tp"]}
// The input gradient of the vocab-split matmul is a partial sum over tp.
// CHECK:       weft.all_reduce %{{.*}} {axes = ["tp"], reason = "weft.rms_norm_grad operand 0: [*, *, *] partial(tp) -> [*, *, *]"}
// CHECK:       weft.embedding_grad %{{.*}}, %{{.*}} {vocab = 8 : i64, vocab_axes = ["tp"]} : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<8x8xf32>
// CHECK-NOT:   weft.slice
// CHECK-NOT:   weft.all_reduce
// CHECK:       return
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @vocab_parallel(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %g = weft.param "ln.weight" {init = "ones"} : tensor<8xf32>
  %y = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Sequence parallelism: with the residual stream split along the sequence,
// a reduce-scatter and an all-gather stand where the all-reduces were.
// CHECK-LABEL: func @sequence_parallel_mlp
// CHECK-NOT:   weft.all_reduce {{.*}}tensor<2x4x8xf32>
// CHECK:       weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64, reason = "weft.matmul operand 0: [*, tp, *] -> [*, *, *]"} : (tensor<2x2x8xf32>) -> tensor<2x4x8xf32>
// CHECK:       weft.reduce_scatter %{{.*}} {axes = ["tp"], dim = 1 : i64, reason = "weft.add operand 1: [*, *, *] partial(tp) -> [*, tp, *]"} : (tensor<2x4x8xf32>) -> tensor<2x2x8xf32>
// The loss over split rows is a partial sum, reduced where it is computed.
// CHECK:       weft.cross_entropy %{{.*}} {denominator = 8 : i64}
// CHECK-NEXT:  weft.all_reduce %{{.*}} {axes = ["tp"], reason = "returned loss: [] partial(tp) -> []"}
// CHECK:       weft.cross_entropy_grad
// CHECK:       weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64
// CHECK:       weft.reduce_scatter %{{.*}} {axes = ["tp"], dim = 1 : i64
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_parallel_mlp(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x0 = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %x = weft.shard %x0 {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  %w1 = weft.param "fc.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [[], ["tp"]]>} : tensor<8x32xf32>
  %a = weft.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x32xf32>) -> tensor<2x4x32xf32>
  %h = weft.gelu %a : tensor<2x4x32xf32>
  %w2 = weft.param "proj.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<32x8xf32>
  %o = weft.matmul %h, %w2 : (tensor<2x4x32xf32>, tensor<32x8xf32>) -> tensor<2x4x8xf32>
  %y0 = weft.add %x, %o : tensor<2x4x8xf32>
  %y = weft.shard %y0 {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// ZeRO-3: a parameter stored split over dp is all-gathered before each use
// (forward and backward, so the gathered copy dies right after), and its
// gradient is reduce-scattered into its storage split.
// CHECK-LABEL: func @zero3
// CHECK:       %[[W:.*]] = weft.param "w" {{.*}} : tensor<4x8xf32>
// CHECK:       weft.all_gather %[[W]] {axes = ["dp"], dim = 0 : i64, reason = "weft.matmul operand 1: [dp, *] -> [*, *]"} : (tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK:       weft.cross_entropy_grad
// CHECK:       weft.all_gather %[[W]] {axes = ["dp"], dim = 0 : i64
// CHECK:       %[[G:.*]] = weft.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64, reason = "gradient of w: [*, *] partial(dp) -> [dp, *]"} : (tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK:       weft.param_grad "w", %[[G]] : tensor<4x8xf32>
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @zero3(%tokens: tensor<2x4xi32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}, %targets: tensor<2x4xi32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}) -> tensor<f32> {
  %e = weft.param "e" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %w = weft.param "w" {init = "normal", std = 0.02, weft.storage = #weft.sharding<dims = [["dp"], []]>, weft.grad_storage = #weft.sharding<dims = [["dp"], []]>} : tensor<8x8xf32>
  %y = weft.matmul %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %y, %e {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// ZeRO-3 under sequence parallelism in bf16: the matmul reads the bf16 copy
// of the weight's dp-gather, made when the copy was partitioned. The
// weight still weighs as a parameter, so it keeps its tp split and the
// sequence-split input is gathered over tp, as without ZeRO-3 (it was the
// weight that was gathered over tp, silently undoing tensor parallelism).
// CHECK-LABEL: func @zero3_sequence_parallel_bf16
// CHECK:       weft.all_gather %{{.*}} {axes = ["dp"], dim = 0 : i64, reason = "weft.cast operand 0: [dp, tp] -> [*, tp]"}
// CHECK:       weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64, reason = "weft.matmul operand 0: [*, tp, *] -> [*, *, *]"}
// CHECK-NOT:   reason = "weft.matmul operand 1: [*, tp] -> [*, *]"
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @zero3_sequence_parallel_bf16(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x0 = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %x = weft.shard %x0 {sharding = #weft.sharding<dims = [[], ["tp"], []]>} : tensor<2x4x8xf32>
  %xc = weft.cast %x : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
  %w = weft.param "fc.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [[], ["tp"]]>, weft.storage = #weft.sharding<dims = [["dp"], ["tp"]]>, weft.grad_storage = #weft.sharding<dims = [["dp"], ["tp"]]>} : tensor<8x16xf32>
  %wc = weft.cast %w : tensor<8x16xf32> to tensor<8x16xbf16>
  %logits = weft.matmul %xc, %wc : (tensor<2x4x8xbf16>, tensor<8x16xbf16>) -> tensor<2x4x16xbf16>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xbf16>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Negative: on a mesh where nothing is split, no collective is needed.
// CHECK-LABEL: func @replicated
// CHECK-NOT:   weft.all_reduce
// CHECK-NOT:   weft.all_gather
// CHECK-NOT:   weft.reduce_scatter
// CHECK-NOT:   weft.slice
// CHECK:       return
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @replicated(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %e = weft.param "e" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %e, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %x, %e {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Two meshes in one module (as pipeline stages will have): the function
// names its own (weft.mesh), and its shards are that mesh's: tp=4 splits the
// 32 features in 4, not the 2 of the first mesh.
// CHECK-LABEL: func @named_mesh
// CHECK:       weft.matmul %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
weft.mesh @wide {axes = ["tp"], shape = array<i64: 4>}
func.func @named_mesh(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> attributes {weft.mesh = @wide} {
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

// -----

// A constant (a mask over the column-parallel features) is whole on every
// rank: where the select reads the features split over tp, each rank
// slices its block of the mask locally (no communication). The constant
// has no gradient: no select_grad for it, nor for the -inf.
// CHECK-LABEL: func @constant_mask
// CHECK-DAG:   %[[MASK:.*]] = weft.constant dense<{{.*}}> : tensor<4x16xf32>
// CHECK-DAG:   %[[NINF:.*]] = weft.constant dense<0xFF800000> : tensor<f32>
// CHECK:       %[[BLOCK:.*]] = weft.slice %[[MASK]] {axes = ["tp"], dim = 1 : i64{{.*}}} : (tensor<4x16xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:  weft.select %[[BLOCK]], %{{.*}}, %[[NINF]] : (tensor<4x8xf32>, tensor<2x4x8xf32>, tensor<f32>) -> tensor<2x4x8xf32>
// CHECK-COUNT-1: weft.select_grad
// CHECK-NOT:   weft.select_grad
// CHECK:       return
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @constant_mask(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %w1 = weft.param "fc.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [[], ["tp"]]>} : tensor<8x16xf32>
  %a = weft.matmul %x, %w1 : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %mask = weft.constant dense<1.0> : tensor<4x16xf32>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %m = weft.select %mask, %a, %ninf : (tensor<4x16xf32>, tensor<2x4x16xf32>, tensor<f32>) -> tensor<2x4x16xf32>
  %w2 = weft.param "proj.weight" {init = "normal", std = 0.02, weft.sharding = #weft.sharding<dims = [["tp"], []]>} : tensor<16x8xf32>
  %o = weft.matmul %m, %w2 : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
  %logits = weft.matmul %o, %wte {transpose_b = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A regression's loss on data-parallel rows: each rank sums its squared
// errors over all 8 elements of the global batch (denominator), the loss an
// all-reduce of the partial sums; its gradient needs no collective.
// CHECK-LABEL: func @mse_rows
// CHECK:       %[[L:.*]] = weft.mse_loss %{{.*}}, %arg0 {denominator = 8 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
// CHECK-NEXT:  weft.all_reduce %[[L]] {axes = ["dp"]
// CHECK:       weft.mse_loss_grad %{{.*}}, %arg0, %{{.*}} {denominator = 8 : i64} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @mse_rows(%y: tensor<4x2xf32> {weft.sharding = #weft.sharding<dims = [["dp"], []]>}) -> tensor<f32> {
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<2xf32>
  %b = weft.broadcast %w : tensor<2xf32> to tensor<4x2xf32>
  %p = weft.gelu %b : tensor<4x2xf32>
  %l = weft.mse_loss %p, %y : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Context parallelism: each rank holds a block of every sequence (cp).
// Everything token-local runs on the block; rope rotates the block's global
// positions, and attention runs the block's queries against the keys and
// values of the whole sequence, all-gathered. Their gradients sum every
// rank's queries: reduce-scattered back to the blocks. Weight gradients are
// partial sums over cp, as over dp.
// CHECK-LABEL: func @context_parallel
// CHECK:       weft.rope %{{.*}} {num_heads = 2 : i64, seq_axes = ["cp"], theta = 1.000000e+04 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK:       %[[K:.*]] = weft.all_gather %{{.*}} {axes = ["cp"], dim = 1 : i64, reason = "weft.attention operand 1: [*, cp, *] -> [*, *, *]"} : (tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT:  %[[V:.*]] = weft.all_gather %{{.*}} {axes = ["cp"], dim = 1 : i64, reason = "weft.attention operand 2: [*, cp, *] -> [*, *, *]"} : (tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NEXT:  weft.attention %{{.*}}, %[[K]], %[[V]] {num_heads = 2 : i64, num_kv_heads = 2 : i64, seq_axes = ["cp"]} : (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x4x8xf32>
// CHECK:       %{{.*}}, %[[DK:.*]], %[[DV:.*]] = weft.attention_grad {{.*}} -> (tensor<2x4x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>)
// CHECK-NEXT:  weft.reduce_scatter %[[DK]] {axes = ["cp"], dim = 1 : i64, reason = "weft.rope operand 0: [*, *, *] partial(cp) -> [*, cp, *]"}
// CHECK:       weft.reduce_scatter %[[DV]] {axes = ["cp"], dim = 1
// CHECK:       weft.all_reduce %{{.*}} {axes = ["cp"], reason = "gradient of wq: [*, *] partial(cp) -> [*, *]"}
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @context_parallel(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %wq = weft.param "wq" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %wk = weft.param "wk" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %q0 = weft.matmul %x, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %k0 = weft.matmul %x, %wk : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %q = weft.rope %q0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %k = weft.rope %k0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %a = weft.attention %q, %k, %x {num_heads = 2, num_kv_heads = 2} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// All-to-all context parallelism (weft.context_parallel, DeepSpeed's
// Ulysses): attention takes cp from its sequence onto its heads. Its
// operands move there by one all-to-all each (the sequence gathered, the
// features scattered: each rank gets its head's whole sequence), it runs
// whole sequences of its heads (no seq_axes, num_heads local), and its
// result and gradients move back to the rank's block of the sequence. Under
// load balancing (weft.seq_chunks) only attention may see the sequence
// whole: the runtime reads each row's position.
// CHECK-LABEL: func @context_all_to_all
// CHECK:       %[[Q:.*]] = weft.all_to_all %{{.*}} {axes = ["cp"], concat_dim = 1 : i64, reason = "weft.attention operand 0: [*, cp, *] -> [*, *, cp]", split_dim = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
// CHECK:       %[[A:.*]] = weft.attention %[[Q]], %{{.*}}, %{{.*}} {num_heads = 1 : i64, num_kv_heads = 1 : i64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK-NEXT:  weft.all_to_all %[[A]] {axes = ["cp"], concat_dim = 2 : i64, reason = "weft.matmul operand 0: [*, *, cp] -> [*, cp, *]", split_dim = 1 : i64} : (tensor<2x8x4xf32>) -> tensor<2x4x8xf32>
// CHECK:       weft.attention_grad {{.*}} -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
// CHECK-NOT:   weft.all_gather
// CHECK:       weft.all_reduce %{{.*}} {axes = ["cp"], reason = "gradient of wq: [*, *] partial(cp) -> [*, *]"}
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @context_all_to_all(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> attributes {weft.context_parallel = "all-to-all", weft.seq_chunks = 4 : i64} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %wq = weft.param "wq" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %wk = weft.param "wk" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %q0 = weft.matmul %x, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %k0 = weft.matmul %x, %wk : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %q = weft.rope %q0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %k = weft.rope %k0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %a = weft.attention %q, %k, %x {num_heads = 2, num_kv_heads = 2} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Ring context parallelism (weft.context_parallel = "ring"): K and V stay in
// the rank's block. Attention becomes cp steps: the next block's ring_shift
// starts (async), the rank's queries run against the block it holds, and
// the blocks' results merge by their log-sum-exps. The gradient runs the ring
// again from the forward's output and log-sum-exp; each block's dK and dV
// sums travel with it and a last shift brings them home. Nothing is
// gathered, and no attention result is a partial sum.
// CHECK-LABEL: func @context_ring
// CHECK:       %[[K1:.*]] = weft.ring_shift %[[K:.*]] {axes = ["cp"], reason = "ring attention: the next key block", weft.async} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK:       %[[O0:.*]], %[[L0:.*]] = weft.attention_block %[[Q:.*]], %[[K]], %{{.*}} {num_heads = 2 : i64, num_kv_heads = 2 : i64, ring_step = 0 : i64, seq_axes = ["cp"]} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK-NEXT:  %[[O1:.*]], %[[L1:.*]] = weft.attention_block %[[Q]], %[[K1]], %{{.*}} {{{.*}}ring_step = 1 : i64
// CHECK-NEXT:  %[[O:.*]], %[[L:.*]] = weft.softmax_merge %[[O0]], %[[L0]], %[[O1]], %[[L1]] {num_heads = 2 : i64}
// CHECK:       weft.attention_block_grad %{{.*}}, %[[Q]], %[[K]], %{{.*}}, %[[O]], %[[L]] {{{.*}}ring_step = 0
// CHECK:       weft.ring_shift {{.*}}reason = "ring attention gradient: a key block's sum"
// CHECK:       weft.attention_block_grad {{.*}}ring_step = 1
// CHECK-NOT:   weft.all_gather
// CHECK:       weft.all_reduce %{{.*}} {axes = ["cp"], reason = "gradient of wq: [*, *] partial(cp) -> [*, *]"}
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @context_ring(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> attributes {weft.context_parallel = "ring", weft.seq_chunks = 4 : i64} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %wq = weft.param "wq" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %wk = weft.param "wk" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %q0 = weft.matmul %x, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %k0 = weft.matmul %x, %wk : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %q = weft.rope %q0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %k = weft.rope %k0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %a = weft.attention %q, %k, %x {num_heads = 2, num_kv_heads = 2} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The ring carries key padding to every block: the runtime bounds each
// query's keys by its row's tokens, at the queries' global rows (dim_axes).
// CHECK-LABEL: func.func @context_ring_key_padding
// CHECK: weft.attention_block {{.*}}dim_axes = {{.*}}key_padding
// CHECK: weft.attention_block_grad {{.*}}dim_axes = {{.*}}key_padding
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @context_ring_key_padding(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> attributes {weft.context_parallel = "ring"} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %a = weft.attention %x, %x, %x {num_heads = 2, num_kv_heads = 2, key_padding} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// All-to-all needs whole heads on every rank: 2 heads over cp=4 are refused,
// naming the numbers.
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 4>}
func.func @context_all_to_all_heads(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> attributes {weft.context_parallel = "all-to-all"} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  // expected-error @+1 {{'weft.attention' op all-to-all context parallelism splits the heads over cp=4: num_heads=2 and num_kv_heads=2 must both be divisible by 4 (--context-parallel all-gather has no such need)}}
  %a = weft.attention %x, %x, %x {num_heads = 2, num_kv_heads = 2} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Only the cp axis splits attention's queries: a sequence split over tp
// (sequence parallelism) is gathered before rope and attention, which run on
// the whole sequence.
// CHECK-LABEL: func @sequence_over_tp
// CHECK:       weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64, reason = "weft.rope operand 0: [*, tp, *] -> [*, *, *]"}
// CHECK:       weft.attention %{{.*}} {num_heads = 2 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
// CHECK-NOT:   seq_axes
// CHECK:       return
weft.mesh @mesh {axes = ["tp"], shape = array<i64: 2>}
func.func @sequence_over_tp(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["tp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["tp"]]>}) -> tensor<f32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %wq = weft.param "wq" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %wk = weft.param "wk" {init = "normal", std = 0.02} : tensor<8x8xf32>
  %q0 = weft.matmul %x, %wq : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %k0 = weft.matmul %x, %wk : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %q = weft.rope %q0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %k = weft.rope %k0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %a = weft.attention %q, %k, %x {num_heads = 2, num_kv_heads = 2} : (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %logits = weft.matmul %a, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Under load-balanced context parallelism (weft.seq_chunks) each sequence is
// stored out of order: a parameter added to it along the sequence (a
// position table outside position_embedding) would be sliced in natural
// order, and is refused, naming the op.
weft.mesh @mesh {axes = ["cp"], shape = array<i64: 2>}
func.func @position_table_over_cp(%tokens: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}, %targets: tensor<2x8xi32> {weft.sharding = #weft.sharding<dims = [[], ["cp"]]>}) -> tensor<f32> attributes {weft.seq_chunks = 4 : i64} {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %x = weft.embedding %wte, %tokens : (tensor<16x8xf32>, tensor<2x8xi32>) -> tensor<2x8x8xf32>
  %p = weft.param "pos" {init = "normal", std = 0.02} : tensor<2x8x8xf32>
  // expected-error @+1 {{'weft.slice' op reads a value sliced over cp (weft.add operand 1: [*, *, *] -> [*, cp, *]), but load-balanced context parallelism holds each sequence as 4 chunks out of order}}
  %y = weft.add %x, %p : tensor<2x8x8xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<2x8x8xf32>, tensor<16x8xf32>) -> tensor<2x8x16xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x8x16xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
