// Concat, Slice and Gather of activations train exactly on the generic path
// (weft-lower-onnx-generic: a slice per run of consecutive indices, runs
// concatenated, other axes moved last and back): a reversed strided slice,
// a concatenation, a gather with a repeated index (its gradient adds up)
// a tensor raised to a tensor power, a layer norm over two dims (axis 1)
// and sin, cos and abs have every parameter's gradient equal to central differences (f64),
// and train on dp=2 like one rank.
// RUN: weft-compile %s --dtype f64 -o %t.weft --quiet
// RUN: weft-run %t.weft --dump | FileCheck %s --check-prefix=DUMP
// DUMP-DAG: split  in=[{{[0-9]+}}] out=[{{[0-9,]+}}]  sizes=[7,1]
// DUMP-DAG: concat
// DUMP-DAG: transpose
// DUMP-DAG: pointwise  in=[{{[0-9]+}}] out=[{{[0-9]+}}]  fn=abs
// DUMP-DAG: pointwise_grad  in=[{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  fn=cos
// DUMP-DAG: binary  in=[{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  fn=pow
// DUMP-DAG: binary_grad {{.*}} fn=pow operand=1
// Every element of both tables (2,048 each): the embedding rows the tokens
// read carry the gradient through the views.
// RUN: weft-run %t.weft --grad-check 2048 --seed 3 | FileCheck %s --check-prefix=GRAD
// GRAD-DAG: wte  max err
// GRAD-DAG: head  max err
// GRAD-DAG: ln.weight  max err
// GRAD-DAG: ln.bias  max err
// GRAD: grad-check: passed
// RUN: weft-tokenize %srcroot/data/corpus.txt -o %t.tokens
// RUN: weft-run %t.weft --data %t.tokens --steps 3 --metrics %t.one.jsonl --quiet
// RUN: weft-compile %s --dtype f64 --mesh dp=2 -o %t.dp.weft --quiet
// RUN: %mpirun -np 2 weft-run %t.dp.weft --data %t.tokens --steps 3 --metrics %t.dp.jsonl --quiet
// RUN: %python -c "import json, sys; runs = [[json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]]; assert all(max(abs(x - y) / abs(x) for x, y in zip(runs[0], r)) <= 1e-12 for r in runs[1:]), runs; print('dp=2 = one rank')" %t.one.jsonl %t.dp.jsonl | FileCheck %s --check-prefix=SAME
// SAME: dp=2 = one rank
func.func @forward(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.3} : tensor<256x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<256x8xf64>, tensor<2x4xi32>) -> tensor<2x4x8xf64>
  // x[:, :, 7::-2] (elements 7, 5, 3, 1) and x[:, :, 0:4].
  %s0 = weft.constant dense<7> : tensor<1xi64>
  %e0 = weft.constant dense<-9> : tensor<1xi64>
  %ax = weft.constant dense<2> : tensor<1xi64>
  %st = weft.constant dense<-2> : tensor<1xi64>
  %odd = weft.onnx_node "Slice" "odd"(%x, %s0, %e0, %ax, %st) {attrs = {start = array<i64: 0, 0, 7>, step = array<i64: 1, 1, -2>}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4x4xf64>
  %s1 = weft.constant dense<0> : tensor<1xi64>
  %e1 = weft.constant dense<4> : tensor<1xi64>
  %low = weft.onnx_node "Slice" "low"(%x, %s1, %e1, %ax) {attrs = {start = array<i64: 0, 0, 0>, step = array<i64: 1, 1, 1>}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x4x4xf64>
  // Along the sequence axis (not the last): moved last and back.
  %cat = weft.onnx_node "Concat" "cat"(%odd, %low) {attrs = {axis = 1 : i64}, opset = 17 : i64} : (tensor<2x4x4xf64>, tensor<2x4x4xf64>) -> tensor<2x8x4xf64>
  %shape = weft.constant dense<[2, 4, 8]> : tensor<3xi64>
  %r = weft.onnx_node "Reshape" "back"(%cat, %shape) {attrs = {}, opset = 17 : i64} : (tensor<2x8x4xf64>, tensor<3xi64>) -> tensor<2x4x8xf64>
  // Features 0, 3, 3, 5, 6, 7, 1, 2: runs [0], [3], [3, 8), [1, 3).
  %idx = weft.constant dense<[0, 3, 3, 5, 6, 7, 1, 2]> : tensor<8xi64>
  %g = weft.onnx_node "Gather" "pick"(%r, %idx) {attrs = {axis = 2 : i64}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<8xi64>) -> tensor<2x4x8xf64>
  // A tensor to a tensor power (binary pow): sigmoid(g) ^ r.
  %sg = weft.onnx_node "Sigmoid" "positive"(%g) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %p = weft.onnx_node "Pow" "power"(%sg, %r) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  // A layer norm over the sequence and features (axis 1): written out.
  %lnw = weft.param "ln.weight" {init = "normal", std = 0.3} : tensor<4x8xf64>
  %lnb = weft.param "ln.bias" {init = "normal", std = 0.3} : tensor<4x8xf64>
  %n, %mean, %inv = weft.onnx_node "LayerNormalization" "ln"(%p, %lnw, %lnb) {attrs = {axis = 1 : i64, epsilon = 1.0e-5 : f64}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<4x8xf64>, tensor<4x8xf64>) -> (tensor<2x4x8xf64>, tensor<2x1x1xf64>, tensor<2x1x1xf64>)
  // sin(n) + cos(n) * |n|.
  %sin = weft.onnx_node "Sin" "sin"(%n) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %cos = weft.onnx_node "Cos" "cos"(%n) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %abs = weft.onnx_node "Abs" "abs"(%n) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %ca = weft.onnx_node "Mul" "cos_abs"(%cos, %abs) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %f = weft.onnx_node "Add" "features"(%sin, %ca) {attrs = {}, opset = 17 : i64} : (tensor<2x4x8xf64>, tensor<2x4x8xf64>) -> tensor<2x4x8xf64>
  %head = weft.param "head" {init = "normal", std = 0.3} : tensor<256x8xf64>
  %logits = weft.matmul %f, %head {transpose_b = true} : (tensor<2x4x8xf64>, tensor<256x8xf64>) -> tensor<2x4x256xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x256xf64>, tensor<2x4xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
