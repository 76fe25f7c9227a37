// RUN: weft-opt %s -split-input-file -weft-raise-onnx -verify-diagnostics | FileCheck %s

// An ONNX linear layer as torch exports it: the rows flattened to [M, K],
// Gemm with the bias, the rows restored. weft.matmul keeps leading dims, so
// the reshapes go and the layer reads x as it is.
// CHECK-LABEL: func @linear
// CHECK-NEXT:  %[[W:.*]] = weft.param "fc.weight"
// CHECK-NEXT:  %[[B:.*]] = weft.param "fc.bias"
// CHECK-NEXT:  %[[M:.*]] = weft.matmul %arg0, %[[W]] : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
// CHECK-NEXT:  %[[Y:.*]] = weft.bias_add %[[M]], %[[B]]
// CHECK-NEXT:  %[[H:.*]] = weft.param "lm_head.weight"
// CHECK-NEXT:  weft.matmul %[[Y]], %[[H]] {transpose_b = true} : (tensor<2x3x8xf32>, tensor<16x8xf32>) -> tensor<2x3x16xf32>
// CHECK-NOT:   weft.onnx_node
// CHECK-NOT:   weft.constant
func.func @linear(%x: tensor<2x3x4xf32>) -> tensor<2x3x16xf32> {
  %rows = weft.constant dense<[-1, 4]> : tensor<2xi64>
  %back = weft.constant dense<[2, 3, 8]> : tensor<3xi64>
  %w = weft.param "fc.weight" {init = "normal", std = 0.02} : tensor<4x8xf32>
  %b = weft.param "fc.bias" {init = "zeros"} : tensor<8xf32>
  %x2 = weft.onnx_node "Reshape" "view"(%x, %rows) {attrs = {allowzero = 1 : i64}, opset = 17 : i64} : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
  %y2 = weft.onnx_node "Gemm" "addmm"(%x2, %w, %b) {attrs = {alpha = 1.0 : f64, beta = 1.0 : f64, transA = 0 : i64, transB = 0 : i64}, opset = 17 : i64} : (tensor<6x4xf32>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
  %y = weft.onnx_node "Reshape" "view_1"(%y2, %back) {attrs = {allowzero = 1 : i64}, opset = 17 : i64} : (tensor<6x8xf32>, tensor<3xi64>) -> tensor<2x3x8xf32>
  // The head: x W^T as MatMul by a transposed parameter.
  %h = weft.param "lm_head.weight" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %ht = weft.onnx_node "Transpose" "t"(%h) {attrs = {perm = array<i64: 1, 0>}, opset = 17 : i64} : (tensor<16x8xf32>) -> tensor<8x16xf32>
  %logits = weft.onnx_node "MatMul" "linear"(%y, %ht) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<8x16xf32>) -> tensor<2x3x16xf32>
  return %logits : tensor<2x3x16xf32>
}

// -----

// Token and learned position embeddings: Gather of the table by the ids,
// plus Gather of the position table by the folded arange [[0, 1, 2]].
// CHECK-LABEL: func @embeddings
// CHECK:       %[[E:.*]] = weft.embedding %{{.*}}, %arg0
// CHECK:       weft.position_embedding %[[E]], %{{.*}} : (tensor<2x3x8xf32>, tensor<16x8xf32>)
func.func @embeddings(%ids: tensor<2x3xi32>) -> tensor<2x3x8xf32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<32x8xf32>
  %wpe = weft.param "wpe" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %pos = weft.constant dense<[[0, 1, 2]]> : tensor<1x3xi64>
  %e = weft.onnx_node "Gather" "embedding"(%wte, %ids) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<32x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %p = weft.onnx_node "Gather" "embedding_1"(%wpe, %pos) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<16x8xf32>, tensor<1x3xi64>) -> tensor<1x3x8xf32>
  %y = weft.onnx_node "Add" "add"(%e, %p) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<1x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Positions that are not 0, 1, 2 (here 1, 2, 3): no pattern takes the Add,
// and the node is left for the generic path (weft-lower-onnx-generic).
// CHECK-LABEL: func @shifted_positions
// CHECK: weft.onnx_node "Gather" "embedding_1"
func.func @shifted_positions(%ids: tensor<2x3xi32>) -> tensor<2x3x8xf32> {
  %wte = weft.param "wte" {init = "normal", std = 0.02} : tensor<32x8xf32>
  %wpe = weft.param "wpe" {init = "normal", std = 0.02} : tensor<16x8xf32>
  %pos = weft.constant dense<[[1, 2, 3]]> : tensor<1x3xi64>
  %e = weft.onnx_node "Gather" "embedding"(%wte, %ids) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<32x8xf32>, tensor<2x3xi32>) -> tensor<2x3x8xf32>
  %p = weft.onnx_node "Gather" "embedding_1"(%wpe, %pos) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<16x8xf32>, tensor<1x3xi64>) -> tensor<1x3x8xf32>
  %y = weft.onnx_node "Add" "add"(%e, %p) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<1x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// GPT-2's gelu_new, node by node: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
// CHECK-LABEL: func @gelu
// CHECK-NEXT:  %[[G:.*]] = weft.gelu %arg0 : tensor<2x8xf32>
// CHECK-NEXT:  return %[[G]]
func.func @gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = weft.constant dense<5.000000e-01> : tensor<f32>
  %three = weft.constant dense<3.000000e+00> : tensor<f32>
  %c = weft.constant dense<4.471500e-02> : tensor<f32>
  %s = weft.constant dense<0.797884583> : tensor<f32>
  %one = weft.constant dense<1.000000e+00> : tensor<f32>
  %a = weft.onnx_node "Mul" "mul"(%x, %half) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %p = weft.onnx_node "Pow" "pow"(%x, %three) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %b = weft.onnx_node "Mul" "mul_1"(%p, %c) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %d = weft.onnx_node "Add" "add"(%x, %b) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = weft.onnx_node "Mul" "mul_2"(%d, %s) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = weft.onnx_node "Tanh" "tanh"(%e) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %f = weft.onnx_node "Add" "add_1"(%t, %one) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = weft.onnx_node "Mul" "mul_3"(%a, %f) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not GELU: 0.04 where GELU has 0.044715. Nothing raises it; the nodes
// are left for the generic path.
// CHECK-LABEL: func @not_gelu
// CHECK: weft.onnx_node "Mul" "mul"
func.func @not_gelu(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = weft.constant dense<5.000000e-01> : tensor<f32>
  %three = weft.constant dense<3.000000e+00> : tensor<f32>
  %c = weft.constant dense<4.000000e-02> : tensor<f32>
  %s = weft.constant dense<0.797884583> : tensor<f32>
  %one = weft.constant dense<1.000000e+00> : tensor<f32>
  %a = weft.onnx_node "Mul" "mul"(%x, %half) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %p = weft.onnx_node "Pow" "pow"(%x, %three) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %b = weft.onnx_node "Mul" "mul_1"(%p, %c) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %d = weft.onnx_node "Add" "add"(%x, %b) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %e = weft.onnx_node "Mul" "mul_2"(%d, %s) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %t = weft.onnx_node "Tanh" "tanh"(%e) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %f = weft.onnx_node "Add" "add_1"(%t, %one) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %y = weft.onnx_node "Mul" "mul_3"(%a, %f) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Causal attention as torch exports scaled_dot_product_attention: q, k, v
// [1, 4, 8] viewed as 2 heads of 4, sqrt(1/sqrt(4)) on each side, the
// additive mask (0 on and below the diagonal, finfo.min above) folded to a
// constant, softmax, the IsNaN guard, the heads viewed back. The keys
// reach [B, H, D, S] by a reshape to [B*H, S, D] and a transpose, as
// torch writes k^T.
// CHECK-LABEL: func @attention
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT:  return %[[A]]
func.func @attention(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %flat = weft.constant dense<[2, 4, 4]> : tensor<3xi64>
  %bhds = weft.constant dense<[1, 2, 4, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %s = weft.constant dense<0.707106769> : tensor<f32>
  %zero = weft.constant dense<0.000000e+00> : tensor<f32>
  %mask = weft.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %kf = weft.onnx_node "Reshape" "flat_k"(%kt, %flat) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<3xi64>) -> tensor<2x4x4xf32>
  %kT = weft.onnx_node "Transpose" "k_T"(%kf) {attrs = {perm = array<i64: 0, 2, 1>}, opset = 17 : i64} : (tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %k5 = weft.onnx_node "Reshape" "unflat_k"(%kT, %bhds) {attrs = {}, opset = 17 : i64} : (tensor<2x4x4xf32>, tensor<4xi64>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %qs = weft.onnx_node "Mul" "scale_q"(%qt, %s) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %ks = weft.onnx_node "Mul" "scale_k"(%k5, %s) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qs, %ks) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %nan = weft.onnx_node "IsNaN" "isnan"(%p) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %pg = weft.onnx_node "Where" "guard"(%nan, %zero, %p) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "sdpa"(%pg, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Opset 23's Attention op, as torch exports SDPA at 23: q [1, 4, 8] as 2
// heads of 4, k and v [1, 4, 4] as 1 head the op repeats (grouped-query),
// is_causal, a scale of its own. The same weft.attention.
// CHECK-LABEL: func @attention_op
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 1 : i64, scale = 2.500000e-01 : f64}
// CHECK-NEXT:  return %[[A]]
func.func @attention_op(%q: tensor<1x4x8xf32>, %k: tensor<1x4x4xf32>, %v: tensor<1x4x4xf32>) -> tensor<1x4x8xf32> {
  %qh = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %kh = weft.constant dense<[1, 4, 1, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %qh) {attrs = {}, opset = 23 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %kh) {attrs = {}, opset = 23 : i64} : (tensor<1x4x4xf32>, tensor<4xi64>) -> tensor<1x4x1x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x1x4xf32>) -> tensor<1x1x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %kh) {attrs = {}, opset = 23 : i64} : (tensor<1x4x4xf32>, tensor<4xi64>) -> tensor<1x4x1x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x1x4xf32>) -> tensor<1x1x4x4xf32>
  %o = weft.onnx_node "Attention" "sdpa"(%qt, %kt, %vt) {attrs = {is_causal = 1 : i64, scale = 2.500000e-01 : f32}, opset = 23 : i64} : (tensor<1x2x4x4xf32>, tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 23 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// The same op with a mask that keeps an arbitrary pattern of keys: no
// attention weft has; the op is left to the generic lowering, which names it.
// CHECK-LABEL: func @attention_op_other_mask
// CHECK: weft.onnx_node "Attention" "sdpa"
func.func @attention_op_other_mask(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %h = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %mask = weft.constant dense<[[true, false, true, false], [true, true, false, false], [false, true, true, false], [true, true, true, true]]> : tensor<4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %h) {attrs = {}, opset = 23 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %h) {attrs = {}, opset = 23 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %h) {attrs = {}, opset = 23 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "Attention" "sdpa"(%qt, %kt, %vt, %mask) {attrs = {}, opset = 23 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<4x4xi1>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 23 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 23 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// The same with the keys read in the queries' order (no k^T): scores
// q k, not q k^T. The views differ, so it is no attention weft has; the
// first node that computes is named.
// CHECK-LABEL: func @keys_not_transposed
// CHECK: weft.onnx_node "MatMul" "scores"
func.func @keys_not_transposed(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %mask = weft.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "sdpa"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// A mask that lets a query see the next key but not the one after (0 just
// above the diagonal) is neither causal nor an encoder's (every key
// visible): no attention weft has, so the nodes are left for the generic
// path.
// CHECK-LABEL: func @not_causal
// CHECK: weft.onnx_node "MatMul" "scores"
func.func @not_causal(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %mask = weft.constant dense<[[0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "sdpa"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// A linear layer with a bias as nn.Linear exports (Qwen2's q/k/v):
// MatMul by the transposed weight, then Add of the bias parameter.
// CHECK-LABEL: func @linear_bias
// CHECK-NEXT:  %[[W:.*]] = weft.param "q_proj.weight"
// CHECK-NEXT:  %[[B:.*]] = weft.param "q_proj.bias"
// CHECK-NEXT:  %[[M:.*]] = weft.matmul %arg0, %[[W]] {transpose_b = true}
// CHECK-NEXT:  weft.bias_add %[[M]], %[[B]] : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
func.func @linear_bias(%x: tensor<2x3x4xf32>) -> tensor<2x3x8xf32> {
  %w = weft.param "q_proj.weight" {init = "normal", std = 0.02} : tensor<8x4xf32>
  %b = weft.param "q_proj.bias" {init = "zeros"} : tensor<8xf32>
  %wt = weft.onnx_node "Transpose" "t"(%w) {attrs = {perm = array<i64: 1, 0>}, opset = 17 : i64} : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %m = weft.onnx_node "MatMul" "linear"(%x, %wt) {attrs = {}, opset = 17 : i64} : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %y = weft.onnx_node "Add" "add"(%m, %b) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Eager attention's mask selects the scores (Where(causal, s, finfo.min))
// instead of adding to them; the scores are divided by sqrt(D) = 2 after
// the product; no IsNaN guard.
// CHECK-LABEL: func @attention_select
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT:  return %[[A]]
func.func @attention_select(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = weft.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Where" "masked"(%mask, %ss, %min) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// GPT-2's eager attention with an attention_mask input: the import's
// padded value (0 where every key is a token, weft.if_padding finfo.min
// where every key is padding) is added to the causal Where: key padding
// over causal attention.
// CHECK-LABEL: func @attention_key_padding
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {key_padding, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT:  return %[[A]]
func.func @attention_key_padding(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = weft.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %pad = weft.constant dense<0.0> : tensor<1x1x1x4xf32> {weft.if_padding = dense<-3.40282347E+38> : tensor<1x1x1x4xf32>}
  %c = weft.onnx_node "Where" "causal"(%mask, %ss, %min) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "padded"(%c, %pad) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Beside it, a padded value that keeps key 3 when every key is padding is
// no key padding: nothing raises, and the mask's reader is refused.
func.func @attention_padding_keeps(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = weft.constant dense<[[[[true, false, false, false], [true, true, false, false], [true, true, true, false], [true, true, true, true]]]]> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %pad = weft.constant dense<0.0> : tensor<1x1x1x4xf32> {weft.if_padding = dense<[[[[-3.40282347E+38, -3.40282347E+38, -3.40282347E+38, 0.0]]]]> : tensor<1x1x1x4xf32>}
  %c = weft.onnx_node "Where" "causal"(%mask, %ss, %min) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  // expected-error @+1 {{ONNX node 'padded' (Add) reads a value computed from the attention_mask input where weft raises no attention mask}}
  %m = weft.onnx_node "Add" "padded"(%c, %pad) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x1x1x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Mistral's sliding window: the mask keeps a band of the diagonal and the
// W - 1 = 1 keys before it (query i reads keys i - 2 < j <= i): causal
// attention with window 2.
// CHECK-LABEL: func @attention_window
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 2 : i64, window = 2 : i64}
// CHECK-NEXT:  return %[[A]]
func.func @attention_window(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = weft.constant dense<[[[[true, false, false, false], [true, true, false, false], [false, true, true, false], [false, false, true, true]]]]> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Where" "masked"(%mask, %ss, %min) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// Beside it, a band that is not one width (query 1 reads key 1 alone, the
// last query keys 2 and 3): no window, left for the generic path.
// CHECK-LABEL: func @attention_ragged_window
// CHECK: weft.onnx_node "Softmax"
func.func @attention_ragged_window(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %mask = weft.constant dense<[[[[true, false, false, false], [false, true, false, false], [false, true, true, false], [false, false, true, true]]]]> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Where" "masked"(%mask, %ss, %min) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// An encoder's attention (DistilBERT, eager): masked_fill of the scores
// where the all-ones attention mask is 0, Where(drop, finfo.min, s) with
// drop false everywhere. Every query sees every key: bidirectional.
// CHECK-LABEL: func @attention_encoder
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {bidirectional, num_heads = 2 : i64, num_kv_heads = 2 : i64}
// CHECK-NEXT:  return %[[A]]
func.func @attention_encoder(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %drop = weft.constant dense<false> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Where" "masked_fill"(%drop, %min, %ss) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// No mask at all: the scaled scores go straight into the softmax.
// CHECK-LABEL: func @attention_no_mask
// CHECK-NEXT:  %[[A:.*]] = weft.attention %arg0, %arg1, %arg2 {bidirectional, num_heads = 2 : i64, num_kv_heads = 2 : i64}
func.func @attention_no_mask(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Identity" "same"(%ss) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// An encoder trained with the next-token loss the import appends: each
// position sees the token it is asked to predict. Refused.
func.func @encoder_next_token(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>, %targets: tensor<1x4xi32>) -> tensor<f32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %min = weft.constant dense<-3.40282347E+38> : tensor<f32>
  %drop = weft.constant dense<false> : tensor<1x1x4x4xi1>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ss = weft.onnx_node "Div" "scaled"(%sc, %two) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Where" "masked_fill"(%drop, %min, %ss) {attrs = {}, opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  // expected-error @+1 {{bidirectional attention (an encoder's) sees the next token that next-token cross-entropy asks it to predict: train it with --loss masked-lm --mask-token ID (BERT's loss), or compile it with --forward-only}}
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  %loss = weft.cross_entropy %y, %targets : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// BERT's token-type embedding called without token_type_ids: Gather of the
// table by its buffered all-zero ids (folded), added to the word
// embeddings: one row added everywhere.
// CHECK-LABEL: func @token_type_row
// CHECK:       %[[T:.*]] = weft.param "token_type_embeddings.weight"
// CHECK-NEXT:  weft.add_row %arg0, %[[T]] {row = 0 : i64} : (tensor<2x3x8xf32>, tensor<2x8xf32>) -> tensor<2x3x8xf32>
func.func @token_type_row(%x: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %ids = weft.constant dense<0> : tensor<2x3xi64>
  %tt = weft.param "token_type_embeddings.weight" {init = "normal", std = 0.02} : tensor<2x8xf32>
  %e = weft.onnx_node "Gather" "embedding_1"(%tt, %ids) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %y = weft.onnx_node "Add" "add"(%x, %e) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y : tensor<2x3x8xf32>
}

// -----

// Constant ids that differ (segment A then B) pick different rows per
// position: not one row, so no fused op; left for the generic path.
// CHECK-LABEL: func @token_type_segments
// CHECK: weft.onnx_node "Gather" "embedding_1"
func.func @token_type_segments(%x: tensor<1x3x8xf32>) -> tensor<1x3x8xf32> {
  %ids = weft.constant dense<[[0, 0, 1]]> : tensor<1x3xi64>
  %tt = weft.param "token_type_embeddings.weight" {init = "normal", std = 0.02} : tensor<2x8xf32>
  %e = weft.onnx_node "Gather" "embedding_1"(%tt, %ids) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<1x3xi64>) -> tensor<1x3x8xf32>
  %y = weft.onnx_node "Add" "add"(%x, %e) {attrs = {}, opset = 17 : i64} : (tensor<1x3x8xf32>, tensor<1x3x8xf32>) -> tensor<1x3x8xf32>
  return %y : tensor<1x3x8xf32>
}

// -----

// One initializer as the weight of two layer norms (what optimize=True
// exports make of norm weights that are all 1 at export): weft would train
// them as one tensor, which the model does not do. Refused; a tied
// embedding and head (@linear above, @embeddings) is the one sharing kept.
func.func @merged_initializer(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{initializer 'ln.weight' is read by 2 ops, so weft would train them as one tensor}}
  %g = weft.param "ln.weight" {init = "loaded"} : tensor<8xf32>
  %b = weft.param "ln.bias" {init = "loaded"} : tensor<8xf32>
  %b2 = weft.param "ln2.bias" {init = "loaded"} : tensor<8xf32>
  %y = weft.onnx_node "LayerNormalization" "ln"(%x, %g, %b) {attrs = {axis = -1 : i64, epsilon = 1.0e-5 : f64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %z = weft.onnx_node "LayerNormalization" "ln2"(%y, %g, %b2) {attrs = {axis = -1 : i64, epsilon = 1.0e-5 : f64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %z : tensor<2x8xf32>
}

// -----

// The exact GELU as torch decomposes it: 0.5 * (x * (1 + erf(x / sqrt(2)))),
// ONNX's own Gelu (opset 20), quick_gelu x * sigmoid(1.702 x), and lone
// activations become weft.act of transformers' name for them.
// CHECK-LABEL: func @activations
// CHECK-NEXT:  %[[G:.*]] = weft.act %arg0 {kind = "gelu"}
// CHECK-NEXT:  %[[O:.*]] = weft.act %[[G]] {kind = "gelu"}
// CHECK-NEXT:  %[[T:.*]] = weft.gelu %[[O]]
// CHECK-NEXT:  %[[Q:.*]] = weft.act %[[T]] {kind = "quick_gelu"}
// CHECK-NEXT:  %[[R:.*]] = weft.act %[[Q]] {kind = "relu"}
// CHECK-NEXT:  return %[[R]]
func.func @activations(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = weft.constant dense<5.000000e-01> : tensor<f32>
  %sqrt2 = weft.constant dense<1.41421354> : tensor<f32>
  %one = weft.constant dense<1.000000e+00> : tensor<f32>
  %k = weft.constant dense<1.702000e+00> : tensor<f32>
  %d = weft.onnx_node "Div" "div"(%x, %sqrt2) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = weft.onnx_node "Erf" "erf"(%d) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = weft.onnx_node "Add" "add"(%e, %one) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = weft.onnx_node "Mul" "mul"(%x, %a) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = weft.onnx_node "Mul" "mul_1"(%half, %m) {attrs = {}, opset = 17 : i64} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %o = weft.onnx_node "Gelu" "gelu"(%g) {attrs = {approximate = "none"}, opset = 20 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %t = weft.onnx_node "Gelu" "gelu_1"(%o) {attrs = {approximate = "tanh"}, opset = 20 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %s1 = weft.onnx_node "Mul" "mul_2"(%t, %k) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %s2 = weft.onnx_node "Sigmoid" "sigmoid"(%s1) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %q = weft.onnx_node "Mul" "mul_3"(%t, %s2) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %r = weft.onnx_node "Relu" "relu"(%q) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}

// -----

// erf(x / 2) is not GELU's erf(x / sqrt(2)): left unraised.
// CHECK-LABEL: func @not_gelu_erf
// CHECK: weft.onnx_node "Div" "div"
func.func @not_gelu_erf(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %half = weft.constant dense<5.000000e-01> : tensor<f32>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %one = weft.constant dense<1.000000e+00> : tensor<f32>
  %d = weft.onnx_node "Div" "div"(%x, %two) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %e = weft.onnx_node "Erf" "erf"(%d) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  %a = weft.onnx_node "Add" "add"(%e, %one) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %m = weft.onnx_node "Mul" "mul"(%x, %a) {attrs = {}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %g = weft.onnx_node "Mul" "mul_1"(%half, %m) {attrs = {}, opset = 17 : i64} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %g : tensor<2x8xf32>
}

// -----

// A factor after the mask scales the mask too (here -1: the masked keys
// would win the softmax): no attention weft has; left unraised.
// CHECK-LABEL: func @scale_after_mask
// CHECK: weft.onnx_node "MatMul" "scores"
func.func @scale_after_mask(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %neg = weft.constant dense<-1.000000e+00> : tensor<f32>
  %mask = weft.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %n = weft.onnx_node "Mul" "flipped"(%m, %neg) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<f32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%n) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "pv"(%p, %vt) {attrs = {}, opset = 17 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 17 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// A layer norm whose Mean or InvStdDev output is read stays an ONNX node
// (weft-lower-onnx-generic writes it out); with them unread it is
// weft.layer_norm.
// CHECK-LABEL: func @layer_norm_outputs
// CHECK:       weft.onnx_node "LayerNormalization" "stats"
// CHECK:       weft.layer_norm
// CHECK-NOT:   weft.onnx_node
func.func @layer_norm_outputs(%x: tensor<2x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>) {
  %y, %mean, %inv = weft.onnx_node "LayerNormalization" "stats"(%x, %g, %b) {attrs = {axis = -1 : i64, epsilon = 1.0e-5 : f64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %z, %m2, %i2 = weft.onnx_node "LayerNormalization" "plain"(%x, %g, %b) {attrs = {axis = -1 : i64, epsilon = 1.0e-5 : f64}, opset = 17 : i64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %mean, %z : tensor<2x8xf32>, tensor<2x1xf32>, tensor<2x8xf32>
}

// -----

// LayerNorm as exporters write it before LayerNormalization (opset 17; the
// TorchScript exporter at opset 12 here): (x - mean) / sqrt(var + eps) *
// gamma + beta over the last axis raises to weft.layer_norm, before beta's
// Add could become a bias_add.
// CHECK-LABEL: func @layer_norm_written
// CHECK-NEXT:  %[[G:.*]] = weft.param "ln.weight"
// CHECK-NEXT:  %[[B:.*]] = weft.param "ln.bias"
// CHECK-NEXT:  %[[Y:.*]] = weft.layer_norm %arg0, %[[G]], %[[B]] {eps = 9.9999997473787516E-6 : f64}
// CHECK-NEXT:  return %[[Y]]
func.func @layer_norm_written(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = weft.param "ln.weight" {init = "loaded"} : tensor<8xf32>
  %b = weft.param "ln.bias" {init = "loaded"} : tensor<8xf32>
  %two = weft.constant dense<2.0> : tensor<f32>
  %eps = weft.constant dense<1.0e-5> : tensor<f32>
  %mu = weft.onnx_node "ReduceMean" "mean"(%x) {attrs = {axes = array<i64: -1>}, opset = 12 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = weft.onnx_node "Sub" "sub"(%x, %mu) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %p = weft.onnx_node "Pow" "pow"(%d, %two) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = weft.onnx_node "ReduceMean" "var"(%p) {attrs = {axes = array<i64: -1>}, opset = 12 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %a = weft.onnx_node "Add" "add_eps"(%v, %eps) {attrs = {}, opset = 12 : i64} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = weft.onnx_node "Sqrt" "sqrt"(%a) {attrs = {}, opset = 12 : i64} : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = weft.onnx_node "Div" "div"(%d, %s) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %m = weft.onnx_node "Mul" "mul"(%n, %g) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = weft.onnx_node "Add" "add"(%m, %b) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Not a layer norm: the variance of x about another centre (the mean of
// something else) stays on the generic path, its beta an ordinary bias.
// CHECK-LABEL: func @layer_norm_other_centre
// CHECK-NOT:   weft.layer_norm
// CHECK:       weft.bias_add
func.func @layer_norm_other_centre(%x: tensor<2x8xf32>, %w: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %g = weft.param "ln.weight" {init = "loaded"} : tensor<8xf32>
  %b = weft.param "ln.bias" {init = "loaded"} : tensor<8xf32>
  %two = weft.constant dense<2.0> : tensor<f32>
  %eps = weft.constant dense<1.0e-5> : tensor<f32>
  %mu = weft.onnx_node "ReduceMean" "mean"(%w) {attrs = {axes = array<i64: -1>}, opset = 12 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %d = weft.onnx_node "Sub" "sub"(%x, %mu) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %p = weft.onnx_node "Pow" "pow"(%d, %two) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
  %v = weft.onnx_node "ReduceMean" "var"(%p) {attrs = {axes = array<i64: -1>}, opset = 12 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  %a = weft.onnx_node "Add" "add_eps"(%v, %eps) {attrs = {}, opset = 12 : i64} : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
  %s = weft.onnx_node "Sqrt" "sqrt"(%a) {attrs = {}, opset = 12 : i64} : (tensor<2x1xf32>) -> tensor<2x1xf32>
  %n = weft.onnx_node "Div" "div"(%d, %s) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
  %m = weft.onnx_node "Mul" "mul"(%n, %g) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %y = weft.onnx_node "Add" "add"(%m, %b) {attrs = {}, opset = 12 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Before opset 13 Softmax's axis defaults to 1 and it normalizes the dims
// from there on, flattened: over heads and both sequence dims, which is no
// attention, so the nodes stay for the generic path (the raise used to read
// a missing axis as -1 at every opset).
// CHECK-LABEL: func @softmax_opset12_default_axis
// CHECK-NOT:   weft.attention
// CHECK:       weft.onnx_node "Softmax" "softmax"
func.func @softmax_opset12_default_axis(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %mask = weft.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "sdpa"(%p, %vt) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 12 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// At opset 12 with axis 3 (the last dim alone) it is attention.
// CHECK-LABEL: func @softmax_opset12_last_axis
// CHECK:       weft.attention %arg0, %arg1, %arg2 {num_heads = 2 : i64, num_kv_heads = 2 : i64, scale = 1.000000e+00 : f64}
func.func @softmax_opset12_last_axis(%q: tensor<1x4x8xf32>, %k: tensor<1x4x8xf32>, %v: tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  %heads = weft.constant dense<[1, 4, 2, 4]> : tensor<4xi64>
  %back = weft.constant dense<[1, 4, 8]> : tensor<3xi64>
  %mask = weft.constant dense<[[0.0, -3.40282347E+38, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, -3.40282347E+38, -3.40282347E+38], [0.0, 0.0, 0.0, -3.40282347E+38], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %q4 = weft.onnx_node "Reshape" "view_q"(%q, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "transpose_q"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %k4 = weft.onnx_node "Reshape" "view_k"(%k, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %kt = weft.onnx_node "Transpose" "transpose_k"(%k4) {attrs = {perm = array<i64: 0, 2, 3, 1>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %v4 = weft.onnx_node "Reshape" "view_v"(%v, %heads) {attrs = {}, opset = 12 : i64} : (tensor<1x4x8xf32>, tensor<4xi64>) -> tensor<1x4x2x4xf32>
  %vt = weft.onnx_node "Transpose" "transpose_v"(%v4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x4x2x4xf32>) -> tensor<1x2x4x4xf32>
  %sc = weft.onnx_node "MatMul" "scores"(%qt, %kt) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = weft.onnx_node "Add" "masked"(%sc, %mask) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%m) {attrs = {axis = 3 : i64}, opset = 12 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = weft.onnx_node "MatMul" "sdpa"(%p, %vt) {attrs = {}, opset = 12 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %ot = weft.onnx_node "Transpose" "transpose_o"(%o) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 12 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x4x2x4xf32>
  %y = weft.onnx_node "Reshape" "view_o"(%ot, %back) {attrs = {}, opset = 12 : i64} : (tensor<1x4x2x4xf32>, tensor<3xi64>) -> tensor<1x4x8xf32>
  return %y : tensor<1x4x8xf32>
}

// -----

// RMSNorm as both exporters write it: w * (x * 1/sqrt(mean(x^2) + eps)), the
// reciprocal a Reciprocal (dynamo) or a Div of 1 (TorchScript), the weight
// on either side.
// CHECK-LABEL: func @rms_norm
// CHECK:       weft.rms_norm %arg0, %{{.*}} {eps = 9.99999997{{[0-9]*}}E-7 : f64}
// CHECK:       weft.rms_norm %arg0, %{{.*}} {eps = 9.99999997{{[0-9]*}}E-7 : f64}
// CHECK-NOT:   weft.onnx_node
func.func @rms_norm(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %w = weft.param "norm.weight" {init = "ones"} : tensor<8xf32>
  %w2 = weft.param "norm2.weight" {init = "ones"} : tensor<8xf32>
  %two = weft.constant dense<2.0> : tensor<f32>
  %eps = weft.constant dense<1.0e-6> : tensor<f32>
  %one = weft.constant dense<1.0> : tensor<f32>
  %axes = weft.constant dense<[-1]> : tensor<1xi64>
  %sq = weft.onnx_node "Pow" "pow"(%x, %two) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32>
  %mean = weft.onnx_node "ReduceMean" "mean"(%sq) {attrs = {axes = array<i64: -1>, keepdims = 1 : i64}, opset = 17 : i64} : (tensor<2x3x8xf32>) -> tensor<2x3x1xf32>
  %var = weft.onnx_node "Add" "add"(%mean, %eps) {attrs = {}, opset = 17 : i64} : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %s = weft.onnx_node "Sqrt" "sqrt"(%var) {attrs = {}, opset = 17 : i64} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %r1 = weft.onnx_node "Reciprocal" "recip"(%s) {attrs = {}, opset = 17 : i64} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n1 = weft.onnx_node "Mul" "normed"(%x, %r1) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y1 = weft.onnx_node "Mul" "scaled"(%n1, %w) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %r2 = weft.onnx_node "Div" "one_over"(%one, %s) {attrs = {}, opset = 17 : i64} : (tensor<f32>, tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %n2 = weft.onnx_node "Mul" "normed_ts"(%x, %r2) {attrs = {}, opset = 17 : i64} : (tensor<2x3x8xf32>, tensor<2x3x1xf32>) -> tensor<2x3x8xf32>
  %y2 = weft.onnx_node "Mul" "scaled_ts"(%w2, %n2) {attrs = {}, opset = 17 : i64} : (tensor<8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return %y1, %y2 : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
