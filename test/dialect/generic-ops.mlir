// The generic path's ops (dialect/WeftGenericOps.td): each shape rule and
// verifier, a valid use beside the invalid ones.
// RUN: weft-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func @valid
// CHECK: weft.binary %arg0, %arg1 {fn = "div"} : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
// CHECK: weft.reduce %arg0 : tensor<2x8x64xf32> to tensor<8x1xf32>
// CHECK: weft.broadcast %arg1 : tensor<2x8x1xf32> to tensor<3x2x8x5xf32>
// CHECK: weft.batch_matmul %{{.*}}, %{{.*}} {transpose_b = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
func.func @valid(%x: tensor<2x8x64xf32>, %s: tensor<2x8x1xf32>) {
  %d = weft.binary %x, %s {fn = "div"} : (tensor<2x8x64xf32>, tensor<2x8x1xf32>) -> tensor<2x8x64xf32>
  %r = weft.reduce %x : tensor<2x8x64xf32> to tensor<8x1xf32>
  %b = weft.broadcast %s : tensor<2x8x1xf32> to tensor<3x2x8x5xf32>
  %p = weft.pointwise %x {fn = "pow", scalar = 2.0} : tensor<2x8x64xf32>
  %h = weft.reshape %x : tensor<2x8x64xf32> to tensor<2x8x4x16xf32>
  %t = weft.transpose %h {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x8x4x16xf32>) -> tensor<2x4x8x16xf32>
  %q = weft.batch_matmul %t, %t {transpose_b = true} : (tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x8x8xf32>
  %y = weft.softmax %q : tensor<2x4x8x8xf32>
  return
}

// -----

func.func @pointwise_unknown(%x: tensor<4xf32>) {
  // expected-error @+1 {{fn 'gelu' is not one of neg, exp, log, sqrt, reciprocal, tanh, sigmoid, relu, erf, sin, cos, abs, not, isnan, add, sub, rsub, mul, div, rdiv, pow}}
  %y = weft.pointwise %x {fn = "gelu"} : tensor<4xf32>
  return
}

// -----

func.func @pointwise_missing_scalar(%x: tensor<4xf32>) {
  // expected-error @+1 {{fn 'pow' needs scalar}}
  %y = weft.pointwise %x {fn = "pow"} : tensor<4xf32>
  return
}

// -----

func.func @pointwise_extra_scalar(%x: tensor<4xf32>) {
  // expected-error @+1 {{fn 'exp' takes no scalar}}
  %y = weft.pointwise %x {fn = "exp", scalar = 1.0} : tensor<4xf32>
  return
}

// -----

func.func @binary_no_broadcast(%a: tensor<2x8xf32>, %b: tensor<3x8xf32>) {
  // expected-error @+2 {{lhs [2, 8] and rhs [3, 8] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.binary %a, %b {fn = "add"} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @binary_unknown(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{fn 'atan2' is not one of add, sub, mul, div, pow, eq, lt, le, gt, ge, and, or, max, min}}
  %y = weft.binary %a, %a {fn = "atan2"} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @binary_grad_dy(%a: tensor<2x8xf32>, %b: tensor<8xf32>, %dy: tensor<8xf32>) {
  // expected-error @+2 {{dy is [8], expected the broadcast shape [2, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.binary_grad %a, %b, %dy {fn = "mul", operand = 1} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @reduce_not_broadcastable(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result [3] does not broadcast to x [2, 8] (reduce sums x into it)}}
  %y = weft.reduce %x : tensor<2x8xf32> to tensor<3xf32>
  return
}

// -----

func.func @broadcast_not_broadcastable(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{x [2, 8] does not broadcast to [8, 2]}}
  %y = weft.broadcast %x : tensor<2x8xf32> to tensor<8x2xf32>
  return
}

// -----

func.func @reshape_count(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{x [2, 8] has 16 elements, the result [3, 5] has 15}}
  %y = weft.reshape %x : tensor<2x8xf32> to tensor<3x5xf32>
  return
}

// -----

func.func @reshape_element(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{changes the element type from 'f32' to 'f64'}}
  %y = weft.reshape %x : tensor<2x8xf32> to tensor<16xf64>
  return
}

// -----

func.func @transpose_repeated(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{perm[1]=0 is out of range or repeated}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @batch_matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) {
  // expected-error @+2 {{a [2, 4, 8] and b [3, 8, 4] must have rank >= 2 and the same batch dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.batch_matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

// The gradients' ops and select, well formed.
func.func @grads_well_formed(%c: tensor<8xf32>, %a: tensor<2x8xf32>, %b: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  %s = weft.select %c, %a, %b : (tensor<8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %ga = weft.select_grad %c, %dy {operand = 0} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %gb = weft.select_grad %c, %dy {operand = 1} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<8xf32>
  %gl = weft.binary_grad %a, %b, %dy {fn = "mul", operand = 0} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %gp = weft.pointwise_grad %a, %dy {fn = "pow", scalar = 3.0} : tensor<2x8xf32>
  %y = weft.softmax %a : tensor<2x8xf32>
  %gs = weft.softmax_grad %y, %dy : tensor<2x8xf32>
  return
}

// -----

func.func @pointwise_infinite_scalar(%x: tensor<4xf32>) {
  // expected-error @+1 {{scalar INF must be finite}}
  %y = weft.pointwise %x {fn = "pow", scalar = 0x7FF0000000000000 : f64} : tensor<4xf32>
  return
}

// -----

func.func @binary_element(%a: tensor<2x8xf32>, %b: tensor<8xf64>) {
  // expected-error @+2 {{operands mix element types 'f32' and 'f64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.binary %a, %b {fn = "add"} : (tensor<2x8xf32>, tensor<8xf64>) -> tensor<2x8xf32>
  return
}

// -----

func.func @binary_grad_operand(%a: tensor<2x8xf32>, %b: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+2 {{operand 2 must be 0 (lhs) or 1 (rhs)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.binary_grad %a, %b, %dy {fn = "mul", operand = 2} : (tensor<2x8xf32>, tensor<8xf32>, tensor<2x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @select_cond_element(%c: tensor<8xf64>, %a: tensor<2x8xf32>) {
  // expected-error @+2 {{cond is 'f64', the operands 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.select %c, %a, %a : (tensor<8xf64>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @select_cond_broadcast(%c: tensor<3xf32>, %a: tensor<2x8xf32>) {
  // expected-error @+2 {{cond [3] and the operands' [2, 8] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.select %c, %a, %a : (tensor<3xf32>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @select_grad_operand(%c: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{operand 2 must be 0 (a) or 1 (b)}}
  %g = weft.select_grad %c, %dy {operand = 2} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @select_grad_cond(%c: tensor<3xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{cond [3] does not broadcast to dy [2, 8]}}
  %g = weft.select_grad %c, %dy {operand = 0} : (tensor<3xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @select_grad_result(%c: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{result [4, 8] does not broadcast to dy [2, 8]}}
  %g = weft.select_grad %c, %dy {operand = 0} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @select_grad_cond_element(%c: tensor<8xf64>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{cond is 'f64', dy 'f32'}}
  %g = weft.select_grad %c, %dy {operand = 0} : (tensor<8xf64>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @select_grad_element(%c: tensor<8xf32>, %dy: tensor<2x8xf32>) {
  // expected-error @+1 {{changes the element type from 'f32' to 'f64'}}
  %g = weft.select_grad %c, %dy {operand = 0} : (tensor<8xf32>, tensor<2x8xf32>) -> tensor<2x8xf64>
  return
}

// -----

func.func @softmax_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{'weft.softmax' op needs rank >= 1: the softmax is over the last dim}}
  %y = weft.softmax %x : tensor<f32>
  return
}

// -----

func.func @softmax_grad_scalar(%y: tensor<f32>) {
  // expected-error @+1 {{'weft.softmax_grad' op needs rank >= 1: the softmax is over the last dim}}
  %g = weft.softmax_grad %y, %y : tensor<f32>
  return
}

// -----

func.func @transpose_perm_size(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{perm has 3 entries, x has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @batch_matmul_element(%a: tensor<2x4x8xf32>, %b: tensor<2x8x4xf64>) {
  // expected-error @+2 {{operands mix element types 'f32' and 'f64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.batch_matmul %a, %b : (tensor<2x4x8xf32>, tensor<2x8x4xf64>) -> tensor<2x4x4xf32>
  return
}

// -----

func.func @batch_matmul_contracting(%a: tensor<2x4x8xf32>, %b: tensor<2x7x4xf32>) {
  // expected-error @+2 {{contracting dims differ: a [2, 4, 8] gives K=8, b [2, 7, 4] gives K=7}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = weft.batch_matmul %a, %b : (tensor<2x4x8xf32>, tensor<2x7x4xf32>) -> tensor<2x4x4xf32>
  return
}
