// Every dimension within 2^48 but 2^49 elements in all: refused by
// weft-compile and by weft-plan-memory alone (issue 9).
// RUN: not weft-compile %s -o %t.weft 2>&1 | FileCheck %s
// RUN: not weft-opt %s -weft-plan-memory 2>&1 | FileCheck %s
// CHECK: error: result #0 of 'weft.gelu' of type tensor<16777216x16777216x2xf32> has more than 2^48 elements
func.func @product(%x: tensor<16777216x16777216x2xf32>) -> tensor<16777216x16777216x2xf32> {
  %0 = weft.gelu %x : tensor<16777216x16777216x2xf32>
  return %0 : tensor<16777216x16777216x2xf32>
}
