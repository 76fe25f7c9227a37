// The generic path's ops train exactly: a block built only of them (a layer
// norm written out, attention by batched matmuls and a softmax, an MLP of
// elementwise functions, a broadcast bias) has every parameter's gradient
// equal to central differences of the loss (f64), and trains on dp=2 and
// on tp=2 (a user's layout splitting the q/k/v and MLP weights; the
// reshape to heads pins its dims, so attention itself runs on gathered
// q, k, v) like one rank.
// RUN: weft-compile %s --dtype f64 -o %t.weft --quiet
// RUN: weft-run %t.weft --dump | FileCheck %s --check-prefix=DUMP
// DUMP-DAG: reduce  in=[{{[0-9]+}}] out=[{{[0-9]+}}]  : [2,4,8] -> [2,4,1]
// DUMP-DAG: pointwise  in=[{{[0-9]+}}] out=[{{[0-9]+}}]  fn=div scalar=8  : [2,4,1] -> [2,4,1]
// DUMP-DAG: binary  in=[{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  fn=sub  : [2,4,8] x [2,4,1] -> [2,4,8]
// DUMP-DAG: transpose  in=[{{[0-9]+}}] out=[{{[0-9]+}}]  perm=[0,2,1,3]  : [2,4,2,4] -> [2,2,4,4]
// DUMP-DAG: batch_matmul  in=[{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  transpose_b=true  : [2,2,4,4] x [2,2,4,4] -> [2,2,4,4]
// DUMP-DAG: softmax_grad
// DUMP-DAG: binary_grad  in=[{{[0-9]+}},{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  fn=mul operand=1  : [2,4,8] x [8] x [2,4,8] -> [8]
// RUN: weft-run %t.weft --grad-check 6 --seed 3 | FileCheck %s --check-prefix=GRAD
// GRAD-DAG: ln.gamma  max err
// GRAD-DAG: attn.wq  max err
// GRAD-DAG: mlp.bias  max err
// GRAD: grad-check: passed
// RUN: weft-tokenize %srcroot/data/corpus.txt -o %t.tokens
// RUN: weft-run %t.weft --data %t.tokens --steps 3 --metrics %t.one.jsonl --quiet
// RUN: weft-compile %s --dtype f64 --mesh dp=2 -o %t.dp.weft --quiet
// RUN: %mpirun -np 2 weft-run %t.dp.weft --data %t.tokens --steps 3 --metrics %t.dp.jsonl --quiet
// RUN: echo '{"params": {"attn.wq": [[], ["tp"]], "attn.wk": [[], ["tp"]], "attn.wv": [[], ["tp"]], "attn.wo": [["tp"], []], "mlp.up": [[], ["tp"]], "mlp.bias": [["tp"]], "mlp.down": [["tp"], []]}}' > %t.layout.json
// RUN: weft-compile %s --dtype f64 --mesh tp=2 --layout %t.layout.json -o %t.tp.weft --quiet
// RUN: %mpirun -np 2 weft-run %t.tp.weft --data %t.tokens --steps 3 --metrics %t.tp.jsonl --quiet
// RUN: %python -c "import json, sys; runs = [[json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]]; assert all(max(abs(x - y) / abs(x) for x, y in zip(runs[0], r)) <= 1e-12 for r in runs[1:]), runs; print('dp=2, tp=2 = one rank')" %t.one.jsonl %t.dp.jsonl %t.tp.jsonl | FileCheck %s --check-prefix=SAME
// SAME: dp=2, tp=2 = one rank
func.func @forward(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.3} : tensor<256x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<256x8xf64>, tensor<2x4xi32>) -> tensor<2x4x8xf64>
  // Layer norm, written out: (x - mean) / sqrt(var + eps) * gamma + beta.
  %gamma = weft.param "ln.gamma" {init = "normal", std = 0.3} : tensor<8xf64>
  %beta = weft.param "ln.beta" {init = "normal", std = 0.3} : tensor<8xf64>
  %sum = weft.reduce %x : tensor<2x4x8xf64> to tensor<2x4x1xf64>
  %mean = weft.pointwise %sum {fn = "div", scalar = 8.0} : tensor<2x4x1xf64>
  %xc = weft.binary %x, %mean {fn = "sub"} : (tensor<2x4x8xf64>, tensor<2x4x1xf64>) -> tensor<2x4x8xf64>
  %sq = weft.pointwise %xc {fn = "pow", scalar = 2.0} : tensor<2x4x8xf64>
  %vsum = weft.reduce %sq : tensor<2x4x8xf64> to tensor<2x4x1xf64>
  %var = weft.pointwise %vsum {fn = "div", scalar = 8.0} : tensor<2x4x1xf64>
  %ve = weft.pointwise %var {fn = "add", scalar = 1.0e-5} : tensor<2x4x1xf64>
  %sd = weft.pointwise %ve {fn = "sqrt"} : tensor<2x4x1xf64>
  %n = weft.binary %xc, %sd {fn = "div"} : (tensor<2x4x8xf64>, tensor<2x4x1xf64>) -> tensor<2x4x8xf64>
  %ng = weft.binary %n, %gamma {fn = "mul"} : (tensor<2x4x8xf64>, tensor<8xf64>) -> tensor<2x4x8xf64>
  %h = weft.binary %ng, %beta {fn = "add"} : (tensor<2x4x8xf64>, tensor<8xf64>) -> tensor<2x4x8xf64>
  // Two heads of 4: scores q k^T / 2, softmax, times v.
  %wq = weft.param "attn.wq" {init = "normal", std = 0.3} : tensor<8x8xf64>
  %wk = weft.param "attn.wk" {init = "normal", std = 0.3} : tensor<8x8xf64>
  %wv = weft.param "attn.wv" {init = "normal", std = 0.3} : tensor<8x8xf64>
  %wo = weft.param "attn.wo" {init = "normal", std = 0.3} : tensor<8x8xf64>
  %q = weft.matmul %h, %wq : (tensor<2x4x8xf64>, tensor<8x8xf64>) -> tensor<2x4x8xf64>
  %k = weft.matmul %h, %wk : (tensor<2x4x8xf64>, tensor<8x8xf64>) -> tensor<2x4x8xf64>
  %v = weft.matmul %h, %wv : (tensor<2x4x8xf64>, tensor<8x8xf64>) -> tensor<2x4x8xf64>
  %q4 = weft.reshape %q : tensor<2x4x8xf64> to tensor<2x4x2x4xf64>
  %k4 = weft.reshape %k : tensor<2x4x8xf64> to tensor<2x4x2x4xf64>
  %v4 = weft.reshape %v : tensor<2x4x8xf64> to tensor<2x4x2x4xf64>
  %qh = weft.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf64>) -> tensor<2x2x4x4xf64>
  %kh = weft.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf64>) -> tensor<2x2x4x4xf64>
  %vh = weft.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x4x2x4xf64>) -> tensor<2x2x4x4xf64>
  %s = weft.batch_matmul %qh, %kh {transpose_b = true} : (tensor<2x2x4x4xf64>, tensor<2x2x4x4xf64>) -> tensor<2x2x4x4xf64>
  %ss = weft.pointwise %s {fn = "mul", scalar = 0.5} : tensor<2x2x4x4xf64>
  %p = weft.softmax %ss : tensor<2x2x4x4xf64>
  %o = weft.batch_matmul %p, %vh : (tensor<2x2x4x4xf64>, tensor<2x2x4x4xf64>) -> tensor<2x2x4x4xf64>
  %ot = weft.transpose %o {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x4x4xf64>) -> tensor<2x4x2x4xf64>
  %o3 = weft.reshape %ot : tensor<2x4x2x4xf64> to tensor<2x4x8xf64>
  %a = weft.matmul %o3, %wo : (tensor<2x4x8xf64>, tensor<8x8xf64>) -> tensor<2x4x8xf64>
  %r1 = weft.add %x, %a : tensor<2x4x8xf64>
  // An MLP of elementwise functions, with a bias broadcast by an Expand.
  %up = weft.param "mlp.up" {init = "normal", std = 0.3} : tensor<8x16xf64>
  %bias = weft.param "mlp.bias" {init = "normal", std = 0.3} : tensor<16xf64>
  %down = weft.param "mlp.down" {init = "normal", std = 0.3} : tensor<16x8xf64>
  %u = weft.matmul %r1, %up : (tensor<2x4x8xf64>, tensor<8x16xf64>) -> tensor<2x4x16xf64>
  %bb = weft.broadcast %bias : tensor<16xf64> to tensor<2x4x16xf64>
  %ub = weft.add %u, %bb : tensor<2x4x16xf64>
  %t = weft.pointwise %ub {fn = "tanh"} : tensor<2x4x16xf64>
  %sg = weft.pointwise %ub {fn = "sigmoid"} : tensor<2x4x16xf64>
  %e = weft.pointwise %sg {fn = "log"} : tensor<2x4x16xf64>
  %er = weft.pointwise %ub {fn = "erf"} : tensor<2x4x16xf64>
  %ex = weft.pointwise %er {fn = "exp"} : tensor<2x4x16xf64>
  %rc = weft.pointwise %ex {fn = "reciprocal"} : tensor<2x4x16xf64>
  %rs = weft.pointwise %sg {fn = "rsub", scalar = 1.5} : tensor<2x4x16xf64>
  %rd = weft.pointwise %rs {fn = "rdiv", scalar = 0.5} : tensor<2x4x16xf64>
  %rr = weft.binary %rd, %rc {fn = "mul"} : (tensor<2x4x16xf64>, tensor<2x4x16xf64>) -> tensor<2x4x16xf64>
  %ng2 = weft.pointwise %rr {fn = "neg"} : tensor<2x4x16xf64>
  %rl = weft.pointwise %t {fn = "relu"} : tensor<2x4x16xf64>
  %sb = weft.pointwise %e {fn = "sub", scalar = 0.25} : tensor<2x4x16xf64>
  %m1 = weft.binary %rl, %sb {fn = "mul"} : (tensor<2x4x16xf64>, tensor<2x4x16xf64>) -> tensor<2x4x16xf64>
  %m2 = weft.binary %m1, %ng2 {fn = "add"} : (tensor<2x4x16xf64>, tensor<2x4x16xf64>) -> tensor<2x4x16xf64>
  %d = weft.matmul %m2, %down : (tensor<2x4x16xf64>, tensor<16x8xf64>) -> tensor<2x4x8xf64>
  %r2 = weft.add %r1, %d : tensor<2x4x8xf64>
  %logits = weft.matmul %r2, %wte {transpose_b = true} : (tensor<2x4x8xf64>, tensor<256x8xf64>) -> tensor<2x4x256xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x256xf64>, tensor<2x4xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
