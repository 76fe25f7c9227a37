// weft.add_row (BERT's token-type embedding: one table row added to every
// position) trains exactly: its gradient, through weft.row_grad into the
// table, and the other ops', against central differences of the loss (f64).
// The table's row 1 is never read: its gradient is 0, numerically too. On
// dp=2 (row_grad of a partial sum, all-reduced) the steps equal one rank's.
// RUN: weft-compile %s --dtype f64 -o %t.weft --quiet
// RUN: weft-run %t.weft --dump | FileCheck %s --check-prefix=DUMP
// DUMP: add_row  in=[{{[0-9]+}},{{[0-9]+}}] out=[{{[0-9]+}}]  row=0  : [2,4,8] x [2,8] -> [2,4,8]
// DUMP: row_grad  in=[{{[0-9]+}}] out=[{{[0-9]+}}]  row=0 rows=2  : [8] -> [2,8]
// RUN: weft-run %t.weft --grad-check 6 --seed 3 | FileCheck %s --check-prefix=GRAD
// GRAD: token_type.weight  max err
// GRAD: grad-check: passed
// RUN: weft-tokenize %srcroot/data/corpus.txt -o %t.tokens
// RUN: weft-run %t.weft --data %t.tokens --steps 3 --metrics %t.one.jsonl --quiet
// RUN: weft-compile %s --dtype f64 --mesh dp=2 -o %t.dp.weft --quiet
// RUN: %mpirun -np 2 weft-run %t.dp.weft --data %t.tokens --steps 3 --metrics %t.dp.jsonl --quiet
// RUN: %python -c "import json, sys; a, b = ([json.loads(l)['loss'] for l in open(f)] for f in sys.argv[1:]); assert max(abs(x - y) / abs(x) for x, y in zip(a, b)) <= 1e-12, (a, b); print('dp=2 = one rank')" %t.one.jsonl %t.dp.jsonl | FileCheck %s --check-prefix=DP
// DP: dp=2 = one rank
func.func @forward(%tokens: tensor<2x4xi32>, %targets: tensor<2x4xi32>) -> tensor<f64> {
  %wte = weft.param "wte" {init = "normal", std = 0.5} : tensor<256x8xf64>
  %tt = weft.param "token_type.weight" {init = "normal", std = 0.5} : tensor<2x8xf64>
  %x = weft.embedding %wte, %tokens : (tensor<256x8xf64>, tensor<2x4xi32>) -> tensor<2x4x8xf64>
  %y = weft.add_row %x, %tt {row = 0 : i64} : (tensor<2x4x8xf64>, tensor<2x8xf64>) -> tensor<2x4x8xf64>
  %g = weft.param "ln.weight" {init = "ones"} : tensor<8xf64>
  %b = weft.param "ln.bias" {init = "zeros"} : tensor<8xf64>
  %h = weft.layer_norm %y, %g, %b {eps = 1.0e-5} : (tensor<2x4x8xf64>, tensor<8xf64>, tensor<8xf64>) -> tensor<2x4x8xf64>
  %logits = weft.matmul %h, %wte {transpose_b = true} : (tensor<2x4x8xf64>, tensor<256x8xf64>) -> tensor<2x4x256xf64>
  %loss = weft.cross_entropy %logits, %targets : (tensor<2x4x256xf64>, tensor<2x4xi32>) -> tensor<f64>
  return %loss : tensor<f64>
}
