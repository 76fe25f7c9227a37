// Finite-difference check of the VJP of weft.attention with an explicit score
// scale (GPT-2 scale_attn_weights / scale_attn_by_inverse_layer_idx), f64.
// RUN: weft-compile %s -o %t.weft --quiet
// RUN: weft-run %t.weft --grad-check 12 | FileCheck %s
// CHECK: grad-check: passed
func.func @attention(%tokens: tensor<2x5xi32>, %targets: tensor<2x5xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.5} : tensor<11x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<11x8xf64>, tensor<2x5xi32>) -> tensor<2x5x8xf64>
  %wq = weft.param "wq" {init = "normal", std = 0.5} : tensor<8x8xf64>
  %wk = weft.param "wk" {init = "normal", std = 0.5} : tensor<8x8xf64>
  %q = weft.matmul %x, %wq : (tensor<2x5x8xf64>, tensor<8x8xf64>) -> tensor<2x5x8xf64>
  %k = weft.matmul %x, %wk : (tensor<2x5x8xf64>, tensor<8x8xf64>) -> tensor<2x5x8xf64>
  %y = weft.attention %q, %k, %x {num_heads = 2, num_kv_heads = 2, scale = 0.7 : f64} : (tensor<2x5x8xf64>, tensor<2x5x8xf64>, tensor<2x5x8xf64>) -> tensor<2x5x8xf64>
  %head = weft.param "head" {init = "normal", std = 0.5} : tensor<8x11xf64>
  %logits = weft.matmul %y, %head : (tensor<2x5x8xf64>, tensor<8x11xf64>) -> tensor<2x5x11xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x5x11xf64>, tensor<2x5xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
