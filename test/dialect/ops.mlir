// Every weft op parses, verifies and prints back (round trip, twice).
// RUN: weft-opt %s | weft-opt | FileCheck %s

// CHECK-LABEL: func @params
// CHECK: weft.param "transformer.wte.weight" {init = "normal", std = 2.000000e-02 : f64} : tensor<256x64xf32>
// CHECK: weft.param "transformer.ln_f.weight" {init = "ones"} : tensor<64xf32>
func.func @params() -> (tensor<256x64xf32>, tensor<64xf32>) {
  %w = weft.param "transformer.wte.weight" {init = "normal", std = 0.02} : tensor<256x64xf32>
  %g = weft.param "transformer.ln_f.weight" {init = "ones"} : tensor<64xf32>
  return %w, %g : tensor<256x64xf32>, tensor<64xf32>
}

// CHECK-LABEL: func @embeddings
// CHECK: weft.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
// CHECK: weft.position_embedding %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x64xf32>
// CHECK: weft.embedding_grad %{{.*}}, %{{.*}} {vocab = 256 : i64}
// CHECK: weft.position_embedding_grad %{{.*}} {positions = 128 : i64}
func.func @embeddings(%table: tensor<256x64xf32>, %pos: tensor<128x64xf32>, %ids: tensor<2x8xi32>) -> (tensor<256x64xf32>, tensor<128x64xf32>) {
  %x = weft.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x8xi32>) -> tensor<2x8x64xf32>
  %y = weft.position_embedding %x, %pos : (tensor<2x8x64xf32>, tensor<128x64xf32>) -> tensor<2x8x64xf32>
  %dt = weft.embedding_grad %y, %ids {vocab = 256} : (tensor<2x8x64xf32>, tensor<2x8xi32>) -> tensor<256x64xf32>
  %dp = weft.position_embedding_grad %y {positions = 128} : (tensor<2x8x64xf32>) -> tensor<128x64xf32>
  return %dt, %dp : tensor<256x64xf32>, tensor<128x64xf32>
}

// A linear layer keeps the batch dims; a weight gradient contracts them.
// CHECK-LABEL: func @matmuls
// CHECK: weft.matmul %{{.*}}, %{{.*}} : (tensor<2x8x64xf32>, tensor<64x192xf32>) -> tensor<2x8x192xf32>
// CHECK: weft.matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<2x8x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
// CHECK: weft.matmul %{{.*}}, %{{.*}} {transpose_a = true} : (tensor<2x8x64xf32>, tensor<2x8x192xf32>) -> tensor<64x192xf32>
func.func @matmuls(%x: tensor<2x8x64xf32>, %w: tensor<64x192xf32>, %e: tensor<256x64xf32>, %dy: tensor<2x8x192xf32>) -> (tensor<2x8x192xf32>, tensor<2x8x256xf32>, tensor<64x192xf32>) {
  %y = weft.matmul %x, %w : (tensor<2x8x64xf32>, tensor<64x192xf32>) -> tensor<2x8x192xf32>
  %l = weft.matmul %x, %e {transpose_b = true} : (tensor<2x8x64xf32>, tensor<256x64xf32>) -> tensor<2x8x256xf32>
  %dw = weft.matmul %x, %dy {transpose_a = true} : (tensor<2x8x64xf32>, tensor<2x8x192xf32>) -> tensor<64x192xf32>
  return %y, %l, %dw : tensor<2x8x192xf32>, tensor<2x8x256xf32>, tensor<64x192xf32>
}

// CHECK-LABEL: func @elementwise
// CHECK: weft.bias_add
// CHECK: weft.reduce_rows %{{.*}} : (tensor<2x8x64xf32>) -> tensor<64xf32>
// CHECK: weft.add %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
// CHECK: weft.mul %{{.*}}, %{{.*}} : tensor<2x8x64xf32>
// CHECK: weft.gelu %{{.*}} : tensor<2x8x64xf32>
// CHECK: weft.gelu_grad
// CHECK: weft.silu
// CHECK: weft.silu_grad
// CHECK: weft.swiglu
// CHECK: weft.swiglu_grad
// CHECK: weft.fill {value = 1.000000e+00 : f64} : tensor<f32>
func.func @elementwise(%x: tensor<2x8x64xf32>, %b: tensor<64xf32>) -> tensor<f32> {
  %0 = weft.bias_add %x, %b : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %1 = weft.reduce_rows %0 : (tensor<2x8x64xf32>) -> tensor<64xf32>
  %2 = weft.add %0, %x : tensor<2x8x64xf32>
  %3 = weft.mul %2, %x : tensor<2x8x64xf32>
  %4 = weft.gelu %3 : tensor<2x8x64xf32>
  %5 = weft.gelu_grad %4, %3 : tensor<2x8x64xf32>
  %6 = weft.silu %5 : tensor<2x8x64xf32>
  %7 = weft.silu_grad %6, %5 : tensor<2x8x64xf32>
  %8 = weft.swiglu %7, %6 : tensor<2x8x64xf32>
  %9:2 = weft.swiglu_grad %8, %7, %6 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>)
  %one = weft.fill {value = 1.0} : tensor<f32>
  return %one : tensor<f32>
}

// CHECK-LABEL: func @norms_and_split
// CHECK: weft.layer_norm {{.*}} {eps = 1.000000e-05 : f64}
// CHECK: weft.layer_norm_grad
// CHECK: weft.rms_norm
// CHECK: weft.rms_norm_grad
// CHECK: weft.split %{{.*}} {sizes = array<i64: 64, 64, 64>} : (tensor<2x8x192xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>)
// CHECK: weft.concat
func.func @norms_and_split(%x: tensor<2x8x64xf32>, %g: tensor<64xf32>, %qkv: tensor<2x8x192xf32>) -> tensor<2x8x192xf32> {
  %0 = weft.layer_norm %x, %g, %g {eps = 1.0e-5} : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %1:3 = weft.layer_norm_grad %0, %x, %g {eps = 1.0e-5} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %2 = weft.rms_norm %x, %g {eps = 1.0e-5} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %3:2 = weft.rms_norm_grad %2, %x, %g {eps = 1.0e-5} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<64xf32>) -> (tensor<2x8x64xf32>, tensor<64xf32>)
  %4:3 = weft.split %qkv {sizes = array<i64: 64, 64, 64>} : (tensor<2x8x192xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>)
  %5 = weft.concat %4#0, %4#1, %4#2 : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>) -> tensor<2x8x192xf32>
  return %5 : tensor<2x8x192xf32>
}

// Grouped-query attention: 4 query heads share 2 key/value heads (head_dim 16).
// CHECK-LABEL: func @attention
// CHECK: weft.rope %{{.*}} {num_heads = 4 : i64, theta = 1.000000e+04 : f64}
// CHECK: weft.rope %{{.*}} {inverse = true, num_heads = 2 : i64, theta = 1.000000e+04 : f64}
// CHECK: weft.rope %{{.*}} {inv_freq = array<f64: 1.000000e+00, 2.500000e-01>, num_heads = 16 : i64, scale = 1.100000e+00 : f64, theta = 1.000000e+04 : f64}
// CHECK: weft.attention %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
// CHECK: weft.attention_grad
func.func @attention(%q: tensor<2x8x64xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x32xf32>) -> tensor<2x8x64xf32> {
  %qr = weft.rope %q {num_heads = 4, theta = 10000.0} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %kr = weft.rope %k {num_heads = 2, theta = 10000.0, inverse = true} : (tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %sr = weft.rope %q {num_heads = 16, theta = 10000.0, inv_freq = array<f64: 1.0, 0.25>, scale = 1.1} : (tensor<2x8x64xf32>) -> tensor<2x8x64xf32>
  %y = weft.attention %qr, %kr, %v {num_heads = 4, num_kv_heads = 2} : (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x64xf32>
  %g:3 = weft.attention_grad %y, %qr, %kr, %v {num_heads = 4, num_kv_heads = 2} : (tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> (tensor<2x8x64xf32>, tensor<2x8x32xf32>, tensor<2x8x32xf32>)
  return %g#0 : tensor<2x8x64xf32>
}

// A regression's loss: pred and float targets of one shape.
// CHECK-LABEL: func @mse
// CHECK: weft.mse_loss %{{.*}}, %{{.*}} : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<f32>
// CHECK: weft.mse_loss_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x1xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
func.func @mse(%p: tensor<2x1xf32>, %y: tensor<2x1xf32>) -> tensor<2x1xf32> {
  %l = weft.mse_loss %p, %y : (tensor<2x1xf32>, tensor<2x1xf32>) -> tensor<f32>
  %d = weft.mse_loss_grad %p, %y, %l : (tensor<2x1xf32>, tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  return %d : tensor<2x1xf32>
}

// CHECK-LABEL: func @loss_and_optimizer
// CHECK: weft.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
// CHECK: weft.cross_entropy_grad
// CHECK: weft.param_grad "w", %{{.*}} : tensor<256x64xf32>
// CHECK: weft.adamw %{{.*}} {weight_decay = true} : tensor<256x64xf32>
func.func @loss_and_optimizer(%logits: tensor<2x8x256xf32>, %t: tensor<2x8xi32>, %dw: tensor<256x64xf32>) -> tensor<f32> {
  %l = weft.cross_entropy %logits, %t : (tensor<2x8x256xf32>, tensor<2x8xi32>) -> tensor<f32>
  %d = weft.cross_entropy_grad %logits, %t, %l : (tensor<2x8x256xf32>, tensor<2x8xi32>, tensor<f32>) -> tensor<2x8x256xf32>
  %w = weft.param "w" {init = "normal", std = 0.02} : tensor<256x64xf32>
  weft.param_grad "w", %dw : tensor<256x64xf32>
  weft.adamw %w {weight_decay = true} : tensor<256x64xf32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func @mesh_and_collectives
// CHECK: weft.shard %{{.*}} {sharding = #weft.sharding<dims = {{\[\["dp"\], \["tp"\], \[\]\]}}>} : tensor<4x8x16xf32>
// CHECK: weft.all_reduce %{{.*}} {axes = ["tp"]} : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
// CHECK: weft.all_gather %{{.*}} {axes = ["tp"], dim = 1 : i64} : (tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
// CHECK: weft.reduce_scatter %{{.*}} {axes = ["tp"], dim = 1 : i64} : (tensor<4x16x16xf32>) -> tensor<4x8x16xf32>
// CHECK: weft.slice %{{.*}} {axes = ["dp", "tp"], dim = 2 : i64} : (tensor<4x8x16xf32>) -> tensor<4x8x4xf32>
// CHECK: weft.all_to_all %{{.*}} {axes = ["tp"], concat_dim = 1 : i64, split_dim = 2 : i64} : (tensor<4x8x4xf32>) -> tensor<4x16x2xf32>
weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
func.func @mesh_and_collectives(%x: tensor<4x8x16xf32>) -> tensor<4x16x2xf32> {
  %s = weft.shard %x {sharding = #weft.sharding<dims = [["dp"], ["tp"], []]>} : tensor<4x8x16xf32>
  %r = weft.all_reduce %s {axes = ["tp"]} : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %g = weft.all_gather %r {axes = ["tp"], dim = 1} : (tensor<4x8x16xf32>) -> tensor<4x16x16xf32>
  %rs = weft.reduce_scatter %g {axes = ["tp"], dim = 1} : (tensor<4x16x16xf32>) -> tensor<4x8x16xf32>
  %l = weft.slice %rs {axes = ["dp", "tp"], dim = 2} : (tensor<4x8x16xf32>) -> tensor<4x8x4xf32>
  %a = weft.all_to_all %l {axes = ["tp"], split_dim = 2, concat_dim = 1} : (tensor<4x8x4xf32>) -> tensor<4x16x2xf32>
  return %a : tensor<4x16x2xf32>
}

// Ring attention's ops (weft-partition makes them under
// weft.context_parallel = "ring", over cp; any axis verifies): a block step, the merge of two blocks by
// their log-sum-exps [B, H, Sq], a block's gradient, and the shift that
// passes a block to the next rank.
// CHECK-LABEL: func @ring_attention
// CHECK: weft.ring_shift %{{.*}} {axes = ["tp"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: weft.attention_block %{{.*}} {num_heads = 2 : i64, num_kv_heads = 1 : i64, ring_step = 1 : i64, seq_axes = ["tp"]} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
// CHECK: weft.softmax_merge
// CHECK: weft.attention_block_grad
func.func @ring_attention(%q: tensor<2x4x8xf32>, %k: tensor<2x4x4xf32>, %v: tensor<2x4x4xf32>) -> tensor<2x4x8xf32> {
  %s = weft.ring_shift %q {axes = ["tp"]} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %o, %l = weft.attention_block %s, %k, %v {num_heads = 2, num_kv_heads = 1, ring_step = 1, seq_axes = ["tp"]} : (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %m, %ml = weft.softmax_merge %o, %l, %o, %l {num_heads = 2} : (tensor<2x4x8xf32>, tensor<2x2x4xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x2x4xf32>)
  %dq, %dk, %dv = weft.attention_block_grad %m, %s, %k, %v, %m, %ml {num_heads = 2, num_kv_heads = 1, ring_step = 0, seq_axes = ["tp"]} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>, tensor<2x4x8xf32>, tensor<2x2x4xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x4xf32>, tensor<2x4x4xf32>)
  return %dq : tensor<2x4x8xf32>
}

// bf16 storage (mixed precision): a cast each way; compute ops take bf16.
// CHECK-LABEL: func @bf16
// CHECK: weft.cast %{{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// CHECK: weft.matmul %{{.*}}, %{{.*}} : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK: weft.cast %{{.*}} : tensor<2x4xbf16> to tensor<2x4xf32>
func.func @bf16(%x: tensor<2x8xbf16>, %w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %w16 = weft.cast %w : tensor<8x4xf32> to tensor<8x4xbf16>
  %y = weft.matmul %x, %w16 : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %y32 = weft.cast %y : tensor<2x4xbf16> to tensor<2x4xf32>
  return %y32 : tensor<2x4xf32>
}

// Dropout with its site (and, after weft-partition, each dim's mesh axes).
// CHECK-LABEL: func.func @dropout
// CHECK: weft.dropout %{{.*}} {p = 1.000000e-01 : f64, site = 3 : i64} : tensor<2x8x64xf32>
// CHECK: weft.dropout %{{.*}} {dim_axes = {{\[\["dp"\], \[\], \[\]\]}}, p = 1.000000e-01 : f64, site = 3 : i64}
func.func @dropout(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %0 = weft.dropout %x {p = 0.1 : f64, site = 3 : i64} : tensor<2x8x64xf32>
  %1 = weft.dropout %0 {p = 0.1 : f64, site = 3 : i64, dim_axes = [["dp"], [], []]} : tensor<2x8x64xf32>
  return %1 : tensor<2x8x64xf32>
}

// A tied head's gradient summed over the micro-batches, sent once a step.
// CHECK-LABEL: func @step_accumulator
// CHECK: weft.accumulate %[[ACC:.*]], %{{.*}} : tensor<4x8xf32>
// CHECK: weft.send %[[ACC]] {once, peer = 0 : i64} : tensor<4x8xf32>
func.func @step_accumulator(%x: tensor<4x8xf32>) {
  %acc = weft.fill {value = 0.0} : tensor<4x8xf32>
  weft.accumulate %acc, %x : tensor<4x8xf32>
  weft.send %acc {peer = 0 : i64, once} : tensor<4x8xf32>
  return
}
