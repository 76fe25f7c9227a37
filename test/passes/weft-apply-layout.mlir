// RUN: weft-opt %s -weft-apply-layout="mesh=dp=2,tp=2 layout=megatron zero=3 sequence-parallel=true" | FileCheck %s
// RUN: not weft-opt %s -weft-apply-layout="mesh=dp=2,tp=4 layout=megatron" 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not weft-opt %s -weft-apply-layout="mesh=dp=3" 2>&1 | FileCheck %s --check-prefix=BATCH

// The mesh is declared and the function names it (its shardings and
// collectives refer to it); inputs split along the batch over dp.
// CHECK:      weft.mesh @mesh {axes = ["dp", "tp"], shape = array<i64: 2, 2>}
// CHECK:      func.func @block(%{{.*}}: tensor<4x8xi32> {weft.sharding = #weft.sharding<dims = {{\[\["dp"\], \[\]\]}}>}
// CHECK-SAME: attributes {{{.*}}weft.mesh = @mesh
// Megatron's vocab-parallel embedding (and, tied, LM head): the vocab dim
// splits over tp, and ZeRO adds dp after it.
// CHECK:      weft.param "transformer.wte.weight" {{.*}}weft.sharding = #weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>, weft.state_storage = #weft.sharding<dims = {{\[\["tp", "dp"\], \[\]\]}}>
// GPT-2's fused QKV is column-parallel in 3 blocks (q, k, v); ZeRO-3 splits
// dim 0 further over dp for storage, gradients and optimizer state.
// CHECK:      weft.param "h.0.attn.c_attn.weight" {{.*}}weft.grad_storage = #weft.sharding<dims = {{\[\["dp"\], \["tp"\]\]}}, blocks = [1, 3]>, weft.sharding = #weft.sharding<dims = {{\[\[\], \["tp"\]\]}}, blocks = [1, 3]>, weft.state_storage = {{.*}}, weft.storage = {{.*}}
// A blocked dim 0 stays whole (its ZeRO split would need a strided gather).
// CHECK:      weft.param "h.0.attn.c_attn.bias" {{.*}}weft.sharding = #weft.sharding<dims = {{\[\["tp"\]\]}}, blocks = [3]>, weft.tp_role
// Row-parallel: the input features split; ZeRO adds dp after tp on dim 0.
// CHECK:      weft.param "h.0.attn.c_proj.weight" {{.*}}weft.sharding = #weft.sharding<dims = {{\[\["tp"\], \[\]\]}}>, weft.state_storage = #weft.sharding<dims = {{\[\["tp", "dp"\], \[\]\]}}>
// Sequence parallelism constrains the residual stream.
// CHECK:      weft.shard %{{.*}} {sharding = #weft.sharding<dims = {{\[\["dp"\], \["tp"\], \[\]\]}}>}
// HEADS: error: tp=4 does not divide num_heads=2
// BATCH: error: dp=3 does not divide dim 0 (size 4) of tokens (batch x seq)
func.func @block(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  // megatron splits each parameter by its declared role (here written by
  // hand; weft-infer-tp-roles reads them from a graph's structure).
  %wte = weft.param "transformer.wte.weight" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "vocab">} : tensor<32x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %w = weft.param "h.0.attn.c_attn.weight" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "column", dim = 1, blocks = 3>} : tensor<16x48xf32>
  %b = weft.param "h.0.attn.c_attn.bias" {init = "zeros", weft.tp_role = #weft.tp_role<kind = "column", blocks = 3>} : tensor<48xf32>
  %qkv0 = weft.matmul %x, %w : (tensor<4x8x16xf32>, tensor<16x48xf32>) -> tensor<4x8x48xf32>
  %qkv = weft.bias_add %qkv0, %b : (tensor<4x8x48xf32>, tensor<48xf32>) -> tensor<4x8x48xf32>
  %q, %k, %v = weft.split %qkv {sizes = array<i64: 16, 16, 16>} : (tensor<4x8x48xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>)
  %a = weft.attention %q, %k, %v {num_heads = 2, num_kv_heads = 2} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %wo = weft.param "h.0.attn.c_proj.weight" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "row">} : tensor<16x16xf32>
  %o = weft.matmul %a, %wo : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %y = weft.add %x, %o : tensor<4x8x16xf32>
  %logits = weft.matmul %y, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
