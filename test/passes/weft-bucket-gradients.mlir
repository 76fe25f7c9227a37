// RUN: weft-opt %s -weft-bucket-gradients="bucket-bytes=200" | FileCheck %s
// RUN: weft-opt %s -weft-bucket-gradients="bucket-bytes=0" | FileCheck %s --check-prefix=OFF

// Data-parallel gradients are reduced in buckets of at most 200 bytes: the
// three 64-byte gradients share one all-reduce (192 bytes), the fourth starts
// a bucket of its own and keeps its plain all-reduce. The stores follow the
// unpack. The loss all-reduce is not a gradient and is left alone.
// CHECK-LABEL: func @step
// CHECK:      weft.all_reduce %{{.*}} {axes = ["dp"]} : (tensor<f32>)
// CHECK:      %[[P:.*]] = weft.pack %arg0, %arg1, %arg2 : (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[R:.*]] = weft.all_reduce %[[P]] {axes = ["dp"], reason = "gradient bucket of 3 tensors (192 bytes)"} : (tensor<48xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[U:.*]]:3 = weft.unpack %[[R]] : (tensor<48xf32>) -> (tensor<16xf32>, tensor<4x4xf32>, tensor<16xf32>)
// CHECK-NEXT: weft.param_grad "a", %[[U]]#0
// CHECK-NEXT: weft.param_grad "b", %[[U]]#1
// CHECK-NEXT: weft.param_grad "c", %[[U]]#2
// CHECK:      %[[D:.*]] = weft.all_reduce %arg3 {axes = ["dp"]}
// CHECK-NEXT: weft.param_grad "d", %[[D]]
// OFF-NOT:    weft.pack
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @step(%ga: tensor<16xf32>, %gb: tensor<4x4xf32>, %gc: tensor<16xf32>, %gd: tensor<16xf32>, %l: tensor<f32>) -> tensor<f32> {
  %loss = weft.all_reduce %l {axes = ["dp"]} : (tensor<f32>) -> tensor<f32>
  %a = weft.param "a" {init = "zeros"} : tensor<16xf32>
  %b = weft.param "b" {init = "zeros"} : tensor<4x4xf32>
  %c = weft.param "c" {init = "zeros"} : tensor<16xf32>
  %d = weft.param "d" {init = "zeros"} : tensor<16xf32>
  %ra = weft.all_reduce %ga {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "a", %ra : tensor<16xf32>
  %rb = weft.all_reduce %gb {axes = ["dp"]} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  weft.param_grad "b", %rb : tensor<4x4xf32>
  %rc = weft.all_reduce %gc {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "c", %rc : tensor<16xf32>
  %rd = weft.all_reduce %gd {axes = ["dp"]} : (tensor<16xf32>) -> tensor<16xf32>
  weft.param_grad "d", %rd : tensor<16xf32>
  return %loss : tensor<f32>
}
