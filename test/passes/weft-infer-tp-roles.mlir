// RUN: weft-opt %s -weft-infer-tp-roles | FileCheck %s

// Tensor-parallel roles come from the graph, never from names: every
// parameter below is named "p<i>". A pre-norm block in GPT-2's shape: the
// fused QKV (a matmul of a norm's output, its bias, a split into three equal
// parts) is column-parallel in 3 blocks; attention's output projection is
// row-parallel; the MLP's up projection and bias are column-parallel, its
// down projection row-parallel. The tied table is the LM head (a norm's
// output times [vocab, d] into the cross-entropy) and the token embedding:
// both split over the vocabulary. The norms, position table and the biases
// added after a row-parallel layer get no role (whole on every rank).
// CHECK-LABEL: func.func @gpt2_block
// CHECK: weft.param "p0" {{.*}}weft.tp_role = #weft.tp_role<kind = "vocab">
// CHECK: weft.param "p1" {init = "zeros"} : tensor<16xf32>
// CHECK: weft.param "p2" {init = "ones"} : tensor<16xf32>
// CHECK: weft.param "p3" {{.*}}weft.tp_role = #weft.tp_role<kind = "column", dim = 1, blocks = 3>
// CHECK: weft.param "p4" {{.*}}weft.tp_role = #weft.tp_role<kind = "column", blocks = 3>
// CHECK: weft.param "p5" {{.*}}weft.tp_role = #weft.tp_role<kind = "row">
// CHECK: weft.param "p6" {init = "zeros"} : tensor<16xf32>
// CHECK: weft.param "p7" {{.*}}weft.tp_role = #weft.tp_role<kind = "column", dim = 1>
// CHECK: weft.param "p8" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "p9" {{.*}}weft.tp_role = #weft.tp_role<kind = "row">
func.func @gpt2_block(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %wte = weft.param "p0" {init = "normal", std = 0.02} : tensor<32x16xf32>
  %x = weft.embedding %wte, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %nb = weft.param "p1" {init = "zeros"} : tensor<16xf32>
  %ng = weft.param "p2" {init = "ones"} : tensor<16xf32>
  %h = weft.layer_norm %x, %ng, %nb {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %w = weft.param "p3" {init = "normal", std = 0.02} : tensor<16x48xf32>
  %b = weft.param "p4" {init = "zeros"} : tensor<48xf32>
  %qkv0 = weft.matmul %h, %w : (tensor<4x8x16xf32>, tensor<16x48xf32>) -> tensor<4x8x48xf32>
  %qkv = weft.bias_add %qkv0, %b : (tensor<4x8x48xf32>, tensor<48xf32>) -> tensor<4x8x48xf32>
  %q, %k, %v = weft.split %qkv {sizes = array<i64: 16, 16, 16>} : (tensor<4x8x48xf32>) -> (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>)
  %a = weft.attention %q, %k, %v {num_heads = 2, num_kv_heads = 2} : (tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %wo = weft.param "p5" {init = "normal", std = 0.02} : tensor<16x16xf32>
  %bo = weft.param "p6" {init = "zeros"} : tensor<16xf32>
  %o0 = weft.matmul %a, %wo : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %o = weft.bias_add %o0, %bo : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %y = weft.add %x, %o : tensor<4x8x16xf32>
  %h2 = weft.layer_norm %y, %ng, %nb {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %wu = weft.param "p7" {init = "normal", std = 0.02} : tensor<16x64xf32>
  %bu = weft.param "p8" {init = "zeros"} : tensor<64xf32>
  %u0 = weft.matmul %h2, %wu : (tensor<4x8x16xf32>, tensor<16x64xf32>) -> tensor<4x8x64xf32>
  %u = weft.bias_add %u0, %bu : (tensor<4x8x64xf32>, tensor<64xf32>) -> tensor<4x8x64xf32>
  %g = weft.gelu %u : tensor<4x8x64xf32>
  %wd = weft.param "p9" {init = "normal", std = 0.02} : tensor<64x16xf32>
  %d = weft.matmul %g, %wd : (tensor<4x8x64xf32>, tensor<64x16xf32>) -> tensor<4x8x16xf32>
  %z = weft.add %y, %d : tensor<4x8x16xf32>
  %hf = weft.layer_norm %z, %ng, %nb {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %logits = weft.matmul %hf, %wte {transpose_b = true} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Llama's shape: [out, in] weights (transpose_b) split along dim 0 when
// column-parallel and dim 1 when row-parallel; q and k through rope,
// grouped-query attention, gate and up meeting in swiglu; an untied head
// [vocab, d] and the token table both split over the vocabulary.
// CHECK-LABEL: func.func @llama_block
// CHECK: weft.param "e" {{.*}}weft.tp_role = #weft.tp_role<kind = "vocab">
// CHECK: weft.param "q" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "k" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "v" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "o" {{.*}}weft.tp_role = #weft.tp_role<kind = "row", dim = 1>
// CHECK: weft.param "gate" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "up" {{.*}}weft.tp_role = #weft.tp_role<kind = "column">
// CHECK: weft.param "down" {{.*}}weft.tp_role = #weft.tp_role<kind = "row", dim = 1>
// CHECK: weft.param "head" {{.*}}weft.tp_role = #weft.tp_role<kind = "vocab">
func.func @llama_block(%tokens: tensor<4x8xi32>, %targets: tensor<4x8xi32>) -> tensor<f32> {
  %e = weft.param "e" {init = "normal", std = 0.02} : tensor<32x16xf32>
  %x = weft.embedding %e, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %n = weft.param "n" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %n {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %wq = weft.param "q" {init = "normal", std = 0.02} : tensor<16x16xf32>
  %wk = weft.param "k" {init = "normal", std = 0.02} : tensor<8x16xf32>
  %wv = weft.param "v" {init = "normal", std = 0.02} : tensor<8x16xf32>
  %q0 = weft.matmul %h, %wq {transpose_b = true} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %k0 = weft.matmul %h, %wk {transpose_b = true} : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x8xf32>
  %v = weft.matmul %h, %wv {transpose_b = true} : (tensor<4x8x16xf32>, tensor<8x16xf32>) -> tensor<4x8x8xf32>
  %q = weft.rope %q0 {num_heads = 4 : i64, theta = 1.0e+04 : f64} : (tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %k = weft.rope %k0 {num_heads = 2 : i64, theta = 1.0e+04 : f64} : (tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %a = weft.attention %q, %k, %v {num_heads = 4, num_kv_heads = 2} : (tensor<4x8x16xf32>, tensor<4x8x8xf32>, tensor<4x8x8xf32>) -> tensor<4x8x16xf32>
  %wo = weft.param "o" {init = "normal", std = 0.02} : tensor<16x16xf32>
  %o = weft.matmul %a, %wo {transpose_b = true} : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %y = weft.add %x, %o : tensor<4x8x16xf32>
  %h2 = weft.rms_norm %y, %n {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %wg = weft.param "gate" {init = "normal", std = 0.02} : tensor<48x16xf32>
  %wu = weft.param "up" {init = "normal", std = 0.02} : tensor<48x16xf32>
  %gt = weft.matmul %h2, %wg {transpose_b = true} : (tensor<4x8x16xf32>, tensor<48x16xf32>) -> tensor<4x8x48xf32>
  %up = weft.matmul %h2, %wu {transpose_b = true} : (tensor<4x8x16xf32>, tensor<48x16xf32>) -> tensor<4x8x48xf32>
  %s = weft.swiglu %gt, %up : tensor<4x8x48xf32>
  %wd = weft.param "down" {init = "normal", std = 0.02} : tensor<16x48xf32>
  %d = weft.matmul %s, %wd {transpose_b = true} : (tensor<4x8x48xf32>, tensor<16x48xf32>) -> tensor<4x8x16xf32>
  %z = weft.add %y, %d : tensor<4x8x16xf32>
  %hf = weft.rms_norm %z, %n {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %wh = weft.param "head" {init = "normal", std = 0.02} : tensor<32x16xf32>
  %logits = weft.matmul %hf, %wh {transpose_b = true} : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = weft.cross_entropy %logits, %targets : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// What is not Megatron's stays whole. A column candidate whose output
// reaches a residual add, not a row-parallel layer ("leak"); a matmul of a
// value no norm computed, such as BERT's pooler over the first token
// ("pool"), and the classifier after it; a head as wide as the classes, not
// the vocabulary ("cls"): no roles, and neither the table (no LM head).
// CHECK-LABEL: func.func @not_megatron
// CHECK: weft.param "table" {init = "normal", std = 2.000000e-02 : f64} : tensor<32x16xf32>
// CHECK: weft.param "leak" {init = "normal", std = 2.000000e-02 : f64} : tensor<16x16xf32>
// CHECK: weft.param "pool" {init = "normal", std = 2.000000e-02 : f64} : tensor<16x16xf32>
// CHECK: weft.param "cls" {init = "normal", std = 2.000000e-02 : f64} : tensor<3x16xf32>
// CHECK-NOT: weft.tp_role
// CHECK-LABEL: func.func @declared
func.func @not_megatron(%tokens: tensor<4x8xi32>, %labels: tensor<4xi32>) -> tensor<f32> {
  %e = weft.param "table" {init = "normal", std = 0.02} : tensor<32x16xf32>
  %x = weft.embedding %e, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %n = weft.param "n" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %n {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %wl = weft.param "leak" {init = "normal", std = 0.02} : tensor<16x16xf32>
  %l = weft.matmul %h, %wl : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %y = weft.add %x, %l : tensor<4x8x16xf32>
  %t = weft.transpose %y {perm = array<i64: 0, 2, 1>} : (tensor<4x8x16xf32>) -> tensor<4x16x8xf32>
  %f:2 = weft.split %t {sizes = array<i64: 1, 7>} : (tensor<4x16x8xf32>) -> (tensor<4x16x1xf32>, tensor<4x16x7xf32>)
  %c = weft.reshape %f#0 : tensor<4x16x1xf32> to tensor<4x16xf32>
  %wp = weft.param "pool" {init = "normal", std = 0.02} : tensor<16x16xf32>
  %p = weft.matmul %c, %wp {transpose_b = true} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %pt = weft.act %p {kind = "tanh"} : tensor<4x16xf32>
  %wc = weft.param "cls" {init = "normal", std = 0.02} : tensor<3x16xf32>
  %s = weft.matmul %pt, %wc {transpose_b = true} : (tensor<4x16xf32>, tensor<3x16xf32>) -> tensor<4x3xf32>
  %loss = weft.cross_entropy %s, %labels {masked} : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// A role declared before (by a frontend or by hand) stands: "pinned" stays
// replicated though its structure is column-parallel.
// CHECK: weft.param "pinned" {{.*}}weft.tp_role = #weft.tp_role<kind = "replicated">
// CHECK: weft.param "out" {{.*}}weft.tp_role = #weft.tp_role<kind = "row">
func.func @declared(%tokens: tensor<4x8xi32>) -> tensor<4x8x16xf32> {
  %e = weft.param "e" {init = "normal", std = 0.02} : tensor<32x16xf32>
  %x = weft.embedding %e, %tokens : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %n = weft.param "n" {init = "ones"} : tensor<16xf32>
  %h = weft.rms_norm %x, %n {eps = 1.0e-5} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  %w = weft.param "pinned" {init = "normal", std = 0.02, weft.tp_role = #weft.tp_role<kind = "replicated">} : tensor<16x64xf32>
  %u = weft.matmul %h, %w : (tensor<4x8x16xf32>, tensor<16x64xf32>) -> tensor<4x8x64xf32>
  %g = weft.gelu %u : tensor<4x8x64xf32>
  %wd = weft.param "out" {init = "normal", std = 0.02} : tensor<64x16xf32>
  %d = weft.matmul %g, %wd : (tensor<4x8x64xf32>, tensor<64x16xf32>) -> tensor<4x8x16xf32>
  return %d : tensor<4x8x16xf32>
}
