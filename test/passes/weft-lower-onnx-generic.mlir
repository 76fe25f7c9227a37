// RUN: weft-opt %s -split-input-file -weft-lower-onnx-generic -verify-diagnostics | FileCheck %s

// A layer norm written out, as an export at opset 17 without
// LayerNormalization spells it: each node becomes its generic op; the
// one-element constants become scalars (2, 1e-5), and the mean is a sum
// divided by the global count (16).
// CHECK-LABEL: func @written_out_norm
// CHECK-NEXT: %[[S:.*]] = weft.reduce %arg0 : tensor<2x3x16xf32> to tensor<2x3x1xf32>
// CHECK-NEXT: %[[M:.*]] = weft.pointwise %[[S]] {fn = "div", scalar = 1.600000e+01 : f64} : tensor<2x3x1xf32>
// CHECK-NEXT: %[[C:.*]] = weft.binary %arg0, %[[M]] {fn = "sub"} : (tensor<2x3x16xf32>, tensor<2x3x1xf32>) -> tensor<2x3x16xf32>
// CHECK-NEXT: %[[P:.*]] = weft.pointwise %[[C]] {fn = "pow", scalar = 2.000000e+00 : f64}
// CHECK-NEXT: %[[V:.*]] = weft.reduce %[[P]]
// CHECK-NEXT: %[[VM:.*]] = weft.pointwise %[[V]] {fn = "div", scalar = 1.600000e+01 : f64}
// CHECK-NEXT: %[[E:.*]] = weft.pointwise %[[VM]] {fn = "add", scalar = 9.9999997473787516E-6 : f64}
// CHECK-NEXT: %[[R:.*]] = weft.pointwise %[[E]] {fn = "sqrt"}
// CHECK-NEXT: weft.binary %[[C]], %[[R]] {fn = "div"}
func.func @written_out_norm(%x: tensor<2x3x16xf32>) -> tensor<2x3x16xf32> {
  %axes = weft.constant dense<-1> : tensor<1xi64>
  %two = weft.constant dense<2.000000e+00> : tensor<f32>
  %eps = weft.constant dense<9.99999974E-6> : tensor<f32>
  %m = weft.onnx_node "ReduceMean" "mean"(%x, %axes) {attrs = {keepdims = 1 : i64}, opset = 18 : i64} : (tensor<2x3x16xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  %c = weft.onnx_node "Sub" "sub"(%x, %m) {attrs = {}, opset = 18 : i64} : (tensor<2x3x16xf32>, tensor<2x3x1xf32>) -> tensor<2x3x16xf32>
  %p = weft.onnx_node "Pow" "pow"(%c, %two) {attrs = {}, opset = 18 : i64} : (tensor<2x3x16xf32>, tensor<f32>) -> tensor<2x3x16xf32>
  %v = weft.onnx_node "ReduceMean" "var"(%p, %axes) {attrs = {keepdims = 1 : i64}, opset = 18 : i64} : (tensor<2x3x16xf32>, tensor<1xi64>) -> tensor<2x3x1xf32>
  %e = weft.onnx_node "Add" "eps"(%v, %eps) {attrs = {}, opset = 18 : i64} : (tensor<2x3x1xf32>, tensor<f32>) -> tensor<2x3x1xf32>
  %r = weft.onnx_node "Sqrt" "sqrt"(%e) {attrs = {}, opset = 18 : i64} : (tensor<2x3x1xf32>) -> tensor<2x3x1xf32>
  %y = weft.onnx_node "Div" "div"(%c, %r) {attrs = {}, opset = 18 : i64} : (tensor<2x3x16xf32>, tensor<2x3x1xf32>) -> tensor<2x3x16xf32>
  return %y : tensor<2x3x16xf32>
}

// -----

// A constant on the left: c - x and c / x. ReduceSum without keepdims
// (axes as an attribute before opset 13) reshapes the kept shape away.
// CHECK-LABEL: func @left_constants
// CHECK-NEXT: %[[A:.*]] = weft.pointwise %arg0 {fn = "rsub", scalar = 1.000000e+00 : f64}
// CHECK-NEXT: %[[B:.*]] = weft.pointwise %[[A]] {fn = "rdiv", scalar = 5.000000e-01 : f64}
// CHECK-NEXT: %[[S:.*]] = weft.reduce %[[B]] : tensor<2x8xf32> to tensor<2x1xf32>
// CHECK-NEXT: weft.reshape %[[S]] : tensor<2x1xf32> to tensor<2xf32>
func.func @left_constants(%x: tensor<2x8xf32>) -> tensor<2xf32> {
  %one = weft.constant dense<1.000000e+00> : tensor<f32>
  %half = weft.constant dense<5.000000e-01> : tensor<1xf32>
  %a = weft.onnx_node "Sub" "rsub"(%one, %x) {attrs = {}, opset = 12 : i64} : (tensor<f32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %b = weft.onnx_node "Div" "rdiv"(%half, %a) {attrs = {}, opset = 12 : i64} : (tensor<1xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %s = weft.onnx_node "ReduceSum" "sum"(%b) {attrs = {axes = array<i64: 1>, keepdims = 0 : i64}, opset = 12 : i64} : (tensor<2x8xf32>) -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// Attention spelled out on the generic path: heads split by Reshape and
// Transpose, scores by a batched MatMul whose batch dims broadcast (the
// keys [1, 2, 4, 4] against queries [3, 2, 4, 4]), Softmax over the last
// axis; a MatMul by a 2-D operand stays weft.matmul.
// CHECK-LABEL: func @spelled_attention
// CHECK: %[[K:.*]] = weft.broadcast %{{.*}} : tensor<1x2x4x4xf32> to tensor<3x2x4x4xf32>
// CHECK: %[[S:.*]] = weft.batch_matmul %{{.*}}, %[[K]] : (tensor<3x2x4x4xf32>, tensor<3x2x4x4xf32>) -> tensor<3x2x4x4xf32>
// CHECK: weft.softmax %[[S]] : tensor<3x2x4x4xf32>
// CHECK: weft.matmul %{{.*}}, %arg2 : (tensor<3x2x4x4xf32>, tensor<4x6xf32>) -> tensor<3x2x4x6xf32>
func.func @spelled_attention(%q: tensor<3x4x8xf32>, %k: tensor<1x2x4x4xf32>, %w: tensor<4x6xf32>) -> tensor<3x2x4x6xf32> {
  %shape = weft.constant dense<[3, 4, 2, 4]> : tensor<4xi64>
  %q4 = weft.onnx_node "Reshape" "view"(%q, %shape) {attrs = {}, opset = 17 : i64} : (tensor<3x4x8xf32>, tensor<4xi64>) -> tensor<3x4x2x4xf32>
  %qt = weft.onnx_node "Transpose" "heads"(%q4) {attrs = {perm = array<i64: 0, 2, 1, 3>}, opset = 17 : i64} : (tensor<3x4x2x4xf32>) -> tensor<3x2x4x4xf32>
  %s = weft.onnx_node "MatMul" "scores"(%qt, %k) {attrs = {}, opset = 17 : i64} : (tensor<3x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<3x2x4x4xf32>
  %p = weft.onnx_node "Softmax" "softmax"(%s) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<3x2x4x4xf32>) -> tensor<3x2x4x4xf32>
  %y = weft.onnx_node "MatMul" "out"(%p, %w) {attrs = {}, opset = 17 : i64} : (tensor<3x2x4x4xf32>, tensor<4x6xf32>) -> tensor<3x2x4x6xf32>
  return %y : tensor<3x2x4x6xf32>
}

// -----

// Gemm with alpha = beta = 1 and transB: a matmul and a broadcast add.
// CHECK-LABEL: func @gemm
// CHECK-NEXT: %[[M:.*]] = weft.matmul %arg0, %arg1 {transpose_b = true}
// CHECK-NEXT: weft.binary %[[M]], %arg2 {fn = "add"} : (tensor<4x6xf32>, tensor<6xf32>) -> tensor<4x6xf32>
func.func @gemm(%a: tensor<4x8xf32>, %b: tensor<6x8xf32>, %c: tensor<6xf32>) -> tensor<4x6xf32> {
  %y = weft.onnx_node "Gemm" "fc"(%a, %b, %c) {attrs = {transB = 1 : i64}, opset = 17 : i64} : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// alpha and beta scale the product and C, in that order.
// CHECK-LABEL: func @gemm_scaled
// CHECK-NEXT: %[[M:.*]] = weft.matmul %arg0, %arg1
// CHECK-NEXT: %[[A:.*]] = weft.pointwise %[[M]] {fn = "mul", scalar = 2.500000e-01 : f64}
// CHECK-NEXT: %[[C:.*]] = weft.pointwise %arg2 {fn = "mul", scalar = 3.500000e-01 : f64}
// CHECK-NEXT: weft.binary %[[A]], %[[C]] {fn = "add"}
func.func @gemm_scaled(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<4x6xf32>) -> tensor<4x6xf32> {
  %y = weft.onnx_node "Gemm" "fc"(%a, %b, %c) {attrs = {alpha = 0.25 : f64, beta = 0.35 : f64}, opset = 17 : i64} : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// A constant tensor (here an additive mask) stays a weft.constant, which
// the program holds as a buffer; so does a one-element constant that is
// not finite (a scalar attribute must be), and a constant base of Pow.
// CHECK-LABEL: func @constant_tensor
// CHECK-NEXT: %[[M:.*]] = weft.constant dense<{{.*}}> : tensor<4x4xf32>
// CHECK-NEXT: %[[NINF:.*]] = weft.constant dense<0xFF800000> : tensor<f32>
// CHECK-NEXT: %[[TWO:.*]] = weft.constant dense<2.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.binary %arg0, %[[M]] {fn = "add"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.binary %[[A]], %[[NINF]] {fn = "sub"}
// CHECK-NEXT: weft.binary %[[TWO]], %[[B]] {fn = "pow"} : (tensor<1xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
func.func @constant_tensor(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %mask = weft.constant dense<[[0.0, -1.0e9, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9, -1.0e9], [0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %two = weft.constant dense<2.0> : tensor<1xf32>
  %a = weft.onnx_node "Add" "masked"(%x, %mask) {attrs = {}, opset = 17 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %b = weft.onnx_node "Sub" "past_inf"(%a, %ninf) {attrs = {}, opset = 17 : i64} : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %y = weft.onnx_node "Pow" "exp2"(%two, %b) {attrs = {}, opset = 17 : i64} : (tensor<1xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}

// -----

// Where by a folded condition: a float mask of 1s and 0s, read by
// weft.select (the unpicked -inf is never read, so no NaN is made).
// CHECK-LABEL: func @where_mask
// CHECK: %[[NINF:.*]] = weft.constant dense<0xFF800000> : tensor<f32>
// CHECK: %[[C:.*]] = weft.constant dense<{{\[\[}}1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT: weft.select %[[C]], %arg0, %[[NINF]] : (tensor<2x2xf32>, tensor<3x2x2xf32>, tensor<f32>) -> tensor<3x2x2xf32>
func.func @where_mask(%s: tensor<3x2x2xf32>) -> tensor<3x2x2xf32> {
  %keep = weft.constant dense<[[true, false], [true, true]]> : tensor<2x2xi1>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %y = weft.onnx_node "Where" "causal"(%keep, %s, %ninf) {attrs = {}, opset = 17 : i64} : (tensor<2x2xi1>, tensor<3x2x2xf32>, tensor<f32>) -> tensor<3x2x2xf32>
  return %y : tensor<3x2x2xf32>
}

// -----

// A condition true everywhere picks its operand alone (broadcast to the
// result's shape); false everywhere, the other.
// CHECK-LABEL: func @where_uniform
// CHECK-NEXT: %[[B:.*]] = weft.broadcast %arg0 : tensor<4xf32> to tensor<2x4xf32>
// CHECK-NEXT: return %[[B]], %arg1
func.func @where_uniform(%a: tensor<4xf32>, %b: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %all = weft.constant dense<true> : tensor<2x1xi1>
  %none = weft.constant dense<false> : tensor<2x4xi1>
  %y = weft.onnx_node "Where" "all"(%all, %a, %b) {attrs = {}, opset = 17 : i64} : (tensor<2x1xi1>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %z = weft.onnx_node "Where" "none"(%none, %a, %b) {attrs = {}, opset = 17 : i64} : (tensor<2x4xi1>, tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y, %z : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Comparisons and boolean logic computed from inputs are float masks
// (binary or pointwise mask fns, 1 where true); a folded bool operand
// becomes a 0/1 constant of the others' float type; Where selects by the
// mask.
// CHECK-LABEL: func @computed_masks
// CHECK-DAG: %[[EQ:.*]] = weft.binary %arg0, %arg1 {fn = "eq"}
// CHECK-DAG: %[[LT:.*]] = weft.binary %arg0, %arg1 {fn = "lt"}
// CHECK-DAG: %[[LE:.*]] = weft.binary %arg0, %arg1 {fn = "le"}
// CHECK-DAG: %[[GE:.*]] = weft.binary %arg0, %arg1 {fn = "ge"}
// CHECK-DAG: %[[ODD:.*]] = weft.constant dense<[0.000000e+00, 1.000000e+00, 0.000000e+00, 1.000000e+00]> : tensor<4xf32>
// CHECK-DAG: %[[OR:.*]] = weft.binary %[[EQ]], %[[LT]] {fn = "or"}
// CHECK-DAG: %[[AND:.*]] = weft.binary %[[OR]], %[[ODD]] {fn = "and"}
// CHECK-DAG: %[[NOT:.*]] = weft.pointwise %[[LE]] {fn = "not"}
// CHECK-DAG: weft.select %[[AND]], %arg0, %arg1
// CHECK-DAG: weft.select %[[NOT]], %arg0, %arg1
// CHECK-DAG: weft.select %[[GE]], %arg1, %arg0
func.func @computed_masks(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %odd = weft.constant dense<[false, true, false, true]> : tensor<4xi1>
  %eq = weft.onnx_node "Equal" "eq"(%x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %lt = weft.onnx_node "Less" "lt"(%x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %le = weft.onnx_node "LessOrEqual" "le"(%x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %ge = weft.onnx_node "GreaterOrEqual" "ge"(%x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %or = weft.onnx_node "Or" "or"(%eq, %lt) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %and = weft.onnx_node "And" "and"(%or, %odd) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %not = weft.onnx_node "Not" "not"(%le) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>) -> tensor<4xi1>
  %z = weft.onnx_node "Where" "pick"(%and, %x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w = weft.onnx_node "Where" "pick_not"(%not, %x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %v = weft.onnx_node "Where" "pick_ge"(%ge, %y, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z, %w, %v : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A bool that is neither a comparison lowered here nor folded (an input)
// is refused, naming the node; so is a comparison of integers.
func.func @where_bool_input(%x: tensor<4xf32>, %keep: tensor<4xi1>) -> tensor<4xf32> {
  // expected-error @+1 {{ONNX node 'by_input' (Where, opset 17) selects by tensor<4xi1>, which is neither a tensor<4xf32> mask of a comparison the generic path lowers nor a condition the import folds}}
  %y = weft.onnx_node "Where" "by_input"(%keep, %x, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @compare_ints(%ids: tensor<4xi64>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %pad = weft.constant dense<0> : tensor<i64>
  // expected-error @+1 {{ONNX node 'is_pad' (Equal, opset 17) reads no float tensor (tensor<4xi64>); the generic path compares floats, and the import folds what depends on no input}}
  %m = weft.onnx_node "Equal" "is_pad"(%ids, %pad) {attrs = {}, opset = 17 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
  %y = weft.onnx_node "Where" "pick"(%m, %x, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @bool_output(%x: tensor<4xf32>) -> tensor<4xi1> {
  // expected-error @+1 {{ONNX node 'positive' (Greater, opset 17) is a graph output of bools; weft's outputs are float tensors}}
  %m = weft.onnx_node "Greater" "positive"(%x, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %m : tensor<4xi1>
}

// -----

// A tensor exponent: binary pow (a one-element constant one is pointwise).
// CHECK-LABEL: func @pow_tensor
// CHECK-NEXT: weft.binary %arg0, %arg1 {fn = "pow"}
func.func @pow_tensor(%x: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> {
  %y = weft.onnx_node "Pow" "pow"(%x, %e) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A softmax over another axis (opset 13 on: that axis alone) is the last
// axis's, with the axis moved last and back.
// CHECK-LABEL: func @softmax_axis
// CHECK-NEXT: %[[T:.*]] = weft.transpose %arg0 {perm = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK-NEXT: %[[S:.*]] = weft.softmax %[[T]] : tensor<4x2xf32>
// CHECK-NEXT: weft.transpose %[[S]] {perm = array<i64: 1, 0>} : (tensor<4x2xf32>) -> tensor<2x4xf32>
func.func @softmax_axis(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = weft.onnx_node "Softmax" "sm"(%x) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Opset 12's Softmax defaults to axis 1 and normalizes every dim from it
// as one: [2, 3x4], normalized, reshaped back.
// CHECK-LABEL: func @softmax_opset12
// CHECK-NEXT: %[[R:.*]] = weft.reshape %arg0 : tensor<2x3x4xf32> to tensor<2x12xf32>
// CHECK-NEXT: %[[S:.*]] = weft.softmax %[[R]] : tensor<2x12xf32>
// CHECK-NEXT: weft.reshape %[[S]] : tensor<2x12xf32> to tensor<2x3x4xf32>
func.func @softmax_opset12(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %y = weft.onnx_node "Softmax" "sm"(%x) {attrs = {}, opset = 12 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %y : tensor<2x3x4xf32>
}

// -----

func.func @cast_to_f64(%x: tensor<4xf32>) -> tensor<4xf64> {
  // expected-error @+1 {{ONNX node 'cast' (Cast, opset 17) input 0 is tensor<4xf32>, expected tensor<4xf64>'s element type}}
  %y = weft.onnx_node "Cast" "cast"(%x) {attrs = {to = 11 : i64}, opset = 17 : i64} : (tensor<4xf32>) -> tensor<4xf64>
  return %y : tensor<4xf64>
}

// -----

func.func @unknown(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ONNX node 'hm' (Hardmax, opset 17) is not an op the generic path lowers}}
  %y = weft.onnx_node "Hardmax" "hm"(%x) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// The import's result type is the contract: a node whose declared type is
// not its function's is refused, not trusted.
func.func @wrong_type(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
  // expected-error @+1 {{ONNX node 't' (Transpose, opset 17) lowers to tensor<2x4xf32> but the import gave it tensor<4x2xf32>}}
  %y = weft.onnx_node "Transpose" "t"(%x) {attrs = {perm = array<i64: 0, 1>}, opset = 17 : i64} : (tensor<2x4xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Views and the rest: Unsqueeze (a reshape adding a 1), Expand (a
// broadcast), a Cast to the same type (nothing), ReduceSum with its axes as
// an input (opset 13) and with none under noop_with_empty_axes (nothing),
// and a MatMul of a 2-D by a 3-D operand (the 2-D one broadcast).
// CHECK-LABEL: func @views
// CHECK-NEXT: %[[U:.*]] = weft.reshape %arg0 : tensor<4x8xf32> to tensor<1x4x8xf32>
// CHECK-NEXT: %[[E:.*]] = weft.broadcast %[[U]] : tensor<1x4x8xf32> to tensor<3x4x8xf32>
// CHECK-NEXT: %[[S:.*]] = weft.reduce %[[E]] : tensor<3x4x8xf32> to tensor<3x1x8xf32>
// CHECK-NEXT: %[[A:.*]] = weft.broadcast %arg1 : tensor<5x3xf32> to tensor<8x5x3xf32>
// CHECK-NEXT: weft.batch_matmul %[[A]], %arg2 : (tensor<8x5x3xf32>, tensor<8x3x2xf32>) -> tensor<8x5x2xf32>
func.func @views(%x: tensor<4x8xf32>, %a: tensor<5x3xf32>, %b: tensor<8x3x2xf32>) -> (tensor<3x1x8xf32>, tensor<8x5x2xf32>) {
  %zero = weft.constant dense<0> : tensor<1xi64>
  %one = weft.constant dense<1> : tensor<1xi64>
  %shape = weft.constant dense<[3, 4, 8]> : tensor<3xi64>
  %none = weft.constant dense<> : tensor<0xi64>
  %u = weft.onnx_node "Unsqueeze" "unsqueeze"(%x, %zero) {attrs = {}, opset = 17 : i64} : (tensor<4x8xf32>, tensor<1xi64>) -> tensor<1x4x8xf32>
  %e = weft.onnx_node "Expand" "expand"(%u, %shape) {attrs = {}, opset = 17 : i64} : (tensor<1x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
  %c = weft.onnx_node "Cast" "cast"(%e) {attrs = {to = 1 : i64}, opset = 17 : i64} : (tensor<3x4x8xf32>) -> tensor<3x4x8xf32>
  %s = weft.onnx_node "ReduceSum" "sum"(%c, %one) {attrs = {keepdims = 1 : i64}, opset = 13 : i64} : (tensor<3x4x8xf32>, tensor<1xi64>) -> tensor<3x1x8xf32>
  %n = weft.onnx_node "ReduceSum" "noop"(%s, %none) {attrs = {noop_with_empty_axes = 1 : i64}, opset = 13 : i64} : (tensor<3x1x8xf32>, tensor<0xi64>) -> tensor<3x1x8xf32>
  %m = weft.onnx_node "MatMul" "mm"(%a, %b) {attrs = {}, opset = 17 : i64} : (tensor<5x3xf32>, tensor<8x3x2xf32>) -> tensor<8x5x2xf32>
  return %n, %m : tensor<3x1x8xf32>, tensor<8x5x2xf32>
}

// -----

func.func @gemm_bias(%a: tensor<4x8xf32>, %b: tensor<8x6xf32>, %c: tensor<5xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{ONNX node 'fc' (Gemm, opset 17) has operands [4, 6] and [5] that do not broadcast}}
  %y = weft.onnx_node "Gemm" "fc"(%a, %b, %c) {attrs = {}, opset = 17 : i64} : (tensor<4x8xf32>, tensor<8x6xf32>, tensor<5xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

func.func @two_input_relu(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ONNX node 'relu' (Relu, opset 17) has 2 inputs, not the count its op type takes}}
  %y = weft.onnx_node "Relu" "relu"(%x, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @reduce_declared(%x: tensor<4x4xf32>) -> tensor<1x4xf32> {
  %axes = weft.constant dense<1> : tensor<1xi64>
  // expected-error @+1 {{ONNX node 'sum' (ReduceSum, opset 17) computes [4, 1] but the import gave it tensor<1x4xf32>}}
  %y = weft.onnx_node "ReduceSum" "sum"(%x, %axes) {attrs = {keepdims = 1 : i64}, opset = 17 : i64} : (tensor<4x4xf32>, tensor<1xi64>) -> tensor<1x4xf32>
  return %y : tensor<1x4xf32>
}

// -----

// Concat, Slice and Gather along one axis: weft's split and concat work on
// the last dim, so another axis goes there by a transpose and back. A
// Slice of step 1 is the middle part of a split (the import resolved its
// start and step per dim); a Gather of consecutive constant indices is a
// slice, reshaped to drop (scalar index) or keep the dim.
// CHECK-LABEL: func @along_an_axis
// CHECK-NEXT: %[[A:.*]] = weft.transpose %arg0 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.transpose %arg1 {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.concat %[[A]], %[[B]] : (tensor<3x2xf32>, tensor<3x4xf32>) -> tensor<3x6xf32>
// CHECK-NEXT: %[[CAT:.*]] = weft.transpose %[[C]] {perm = array<i64: 1, 0>} : (tensor<3x6xf32>) -> tensor<6x3xf32>
// CHECK-NEXT: %[[T:.*]] = weft.transpose %[[CAT]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[S:.*]]:3 = weft.split %[[T]] {sizes = array<i64: 1, 4, 1>} : (tensor<3x6xf32>) -> (tensor<3x1xf32>, tensor<3x4xf32>, tensor<3x1xf32>)
// CHECK-NEXT: %[[SL:.*]] = weft.transpose %[[S]]#1 {perm = array<i64: 1, 0>} : (tensor<3x4xf32>) -> tensor<4x3xf32>
// CHECK-NEXT: %[[G:.*]]:2 = weft.split %[[SL]] {sizes = array<i64: 2, 1>} : (tensor<4x3xf32>) -> (tensor<4x2xf32>, tensor<4x1xf32>)
// CHECK-NEXT: weft.reshape %[[G]]#1 : tensor<4x1xf32> to tensor<4xf32>
func.func @along_an_axis(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<4xf32> {
  %cat = weft.onnx_node "Concat" "cat"(%a, %b) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf32>
  %starts = weft.constant dense<1> : tensor<1xi64>
  %ends = weft.constant dense<5> : tensor<1xi64>
  %sl = weft.onnx_node "Slice" "slice"(%cat, %starts, %ends) {attrs = {start = array<i64: 1, 0>, step = array<i64: 1, 1>}, opset = 17 : i64} : (tensor<6x3xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<4x3xf32>
  %last = weft.constant dense<-1> : tensor<i64>
  %g = weft.onnx_node "Gather" "pick"(%sl, %last) {attrs = {axis = 1 : i64}, opset = 17 : i64} : (tensor<4x3xf32>, tensor<i64>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Steps other than 1 and indices out of order pick one run of consecutive
// elements each, concatenated: x[::-2] of 5 is elements 4, 2, 0; indices
// [3, 4, 1] are runs [3, 5) and [1, 2).
// CHECK-LABEL: func @runs
// CHECK-NEXT: %[[A:.*]]:2 = weft.split %arg0 {sizes = array<i64: 4, 1>}
// CHECK-NEXT: %[[B:.*]]:3 = weft.split %arg0 {sizes = array<i64: 2, 1, 2>}
// CHECK-NEXT: %[[C:.*]]:2 = weft.split %arg0 {sizes = array<i64: 1, 4>}
// CHECK-NEXT: %[[BACK:.*]] = weft.concat %[[A]]#1, %[[B]]#1, %[[C]]#0
// CHECK-NEXT: %[[D:.*]]:2 = weft.split %arg0 {sizes = array<i64: 3, 2>}
// CHECK-NEXT: %[[E:.*]]:3 = weft.split %arg0 {sizes = array<i64: 1, 1, 3>}
// CHECK-NEXT: %[[PICK:.*]] = weft.concat %[[D]]#1, %[[E]]#1
// CHECK-NEXT: return %[[BACK]], %[[PICK]]
func.func @runs(%x: tensor<3x5xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %starts = weft.constant dense<-1> : tensor<1xi64>
  %ends = weft.constant dense<-6> : tensor<1xi64>
  %s = weft.onnx_node "Slice" "back"(%x, %starts, %ends) {attrs = {start = array<i64: 0, 4>, step = array<i64: 1, -2>}, opset = 17 : i64} : (tensor<3x5xf32>, tensor<1xi64>, tensor<1xi64>) -> tensor<3x3xf32>
  %idx = weft.constant dense<[3, 4, 1]> : tensor<3xi64>
  %g = weft.onnx_node "Gather" "pick"(%x, %idx) {attrs = {axis = 1 : i64}, opset = 17 : i64} : (tensor<3x5xf32>, tensor<3xi64>) -> tensor<3x3xf32>
  return %s, %g : tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// An index out of range, a slice past its dim: refused by name.
func.func @out_of_range(%x: tensor<6x3xf32>) -> tensor<2x3xf32> {
  %idx = weft.constant dense<[3, 6]> : tensor<2xi64>
  // expected-error @+1 {{ONNX node 'far' (Gather, opset 17) index 6 is out of dim 0 of size 6}}
  %g = weft.onnx_node "Gather" "far"(%x, %idx) {attrs = {axis = 0 : i64}, opset = 17 : i64} : (tensor<6x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}

// -----

// LayerNormalization from axis 1 of [2, 3, 4], with its Mean and
// InvStdDev outputs, written out as ONNX's function body computes it.
// CHECK-LABEL: func @layer_norm_from_axis
// CHECK-NEXT: %[[S:.*]] = weft.reduce %arg0 : tensor<2x3x4xf32> to tensor<2x1x1xf32>
// CHECK-NEXT: %[[M:.*]] = weft.pointwise %[[S]] {fn = "div", scalar = 1.200000e+01 : f64}
// CHECK-NEXT: %[[D:.*]] = weft.binary %arg0, %[[M]] {fn = "sub"}
// CHECK-NEXT: %[[DD:.*]] = weft.binary %[[D]], %[[D]] {fn = "mul"}
// CHECK-NEXT: %[[VS:.*]] = weft.reduce %[[DD]]
// CHECK-NEXT: %[[V:.*]] = weft.pointwise %[[VS]] {fn = "div", scalar = 1.200000e+01 : f64}
// CHECK-NEXT: %[[E:.*]] = weft.pointwise %[[V]] {fn = "add", scalar = 1.000000e-01 : f64}
// CHECK-NEXT: %[[R:.*]] = weft.pointwise %[[E]] {fn = "sqrt"}
// CHECK-NEXT: %[[I:.*]] = weft.pointwise %[[R]] {fn = "reciprocal"}
// CHECK-NEXT: %[[N:.*]] = weft.binary %[[D]], %[[I]] {fn = "mul"}
// CHECK-NEXT: %[[W:.*]] = weft.binary %[[N]], %arg1 {fn = "mul"}
// CHECK-NEXT: %[[Y:.*]] = weft.binary %[[W]], %arg2 {fn = "add"}
// CHECK-NEXT: return %[[Y]], %[[M]], %[[I]]
func.func @layer_norm_from_axis(%x: tensor<2x3x4xf32>, %w: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>) {
  %y, %mean, %inv = weft.onnx_node "LayerNormalization" "ln"(%x, %w, %b) {attrs = {axis = 1 : i64, epsilon = 0.1 : f64}, opset = 17 : i64} : (tensor<2x3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>)
  return %y, %mean, %inv : tensor<2x3x4xf32>, tensor<2x1x1xf32>, tensor<2x1x1xf32>
}

// -----

// A scale that is not of the input's float type: refused by name (the
// pass failed without a message before).
func.func @layer_norm_int_scale(%x: tensor<2x4xf32>, %w: tensor<4xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{ONNX node 'ln' (LayerNormalization, opset 17) input 1 is tensor<4xi64>, expected tensor<2x4xf32>'s element type}}
  %y = weft.onnx_node "LayerNormalization" "ln"(%x, %w) {attrs = {axis = -1 : i64}, opset = 17 : i64} : (tensor<2x4xf32>, tensor<4xi64>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

// Max and Min of two are torch.maximum and torch.minimum (binary max and
// min: a tie sends half the gradient to each); of one, the input. Clip is
// torch.clamp: by resolved constant bounds (the import writes them as
// attributes from opset 11; before, they are attributes), pointwise
// clamp_min then clamp_max; by a bound the inputs compute, a select.
// CHECK-LABEL: func @extrema
// CHECK-NEXT: %[[MAX:.*]] = weft.binary %arg0, %arg1 {fn = "max"}
// CHECK-NEXT: %[[MIN:.*]] = weft.binary %[[MAX]], %arg1 {fn = "min"}
// CHECK-NEXT: %[[LO:.*]] = weft.pointwise %[[MIN]] {fn = "clamp_min", scalar = -5.000000e-01 : f64}
// CHECK-NEXT: %[[HI:.*]] = weft.pointwise %[[LO]] {fn = "clamp_max", scalar = 5.000000e-01 : f64}
// CHECK-NEXT: %[[OLD:.*]] = weft.pointwise %[[HI]] {fn = "clamp_max", scalar = 2.000000e+00 : f64}
// CHECK-NEXT: %[[BINDS:.*]] = weft.binary %[[OLD]], %arg2 {fn = "lt"}
// CHECK-NEXT: weft.select %[[BINDS]], %arg2, %[[OLD]]
func.func @extrema(%x: tensor<4xf32>, %y: tensor<4xf32>, %lo: tensor<f32>) -> tensor<4xf32> {
  %half = weft.constant dense<5.000000e-01> : tensor<f32>
  %nhalf = weft.constant dense<-5.000000e-01> : tensor<f32>
  %a = weft.onnx_node "Max" "max"(%x, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %b = weft.onnx_node "Min" "min"(%a, %y) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %one = weft.onnx_node "Max" "one"(%b) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %c = weft.onnx_node "Clip" "clip"(%one, %nhalf, %half) {attrs = {min = -5.000000e-01 : f64, max = 5.000000e-01 : f64}, opset = 17 : i64} : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  %d = weft.onnx_node "Clip" "old"(%c) {attrs = {max = 2.000000e+00 : f32}, opset = 6 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %e = weft.onnx_node "Clip" "by_input"(%d, %lo) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %e : tensor<4xf32>
}

// -----

// Max of three, and a Clip by an infinite bound, are refused by node.
func.func @max3(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ONNX node 'max3' (Max, opset 17) takes 3 inputs; the generic path lowers Max of one or two}}
  %y = weft.onnx_node "Max" "max3"(%x, %x, %x) {attrs = {}, opset = 17 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

func.func @clip_inf(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{ONNX node 'relu6ish' (Clip, opset 17) has max inf; the generic path clips by finite bounds}}
  %y = weft.onnx_node "Clip" "relu6ish"(%x) {attrs = {min = 0.0 : f64, max = 0x7FF0000000000000 : f64}, opset = 17 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
