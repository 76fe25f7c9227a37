// RUN: weft-opt %s -weft-bucket-gradients="bucket-bytes=200" | FileCheck %s
// RUN: weft-opt %s -weft-bucket-gradients="bucket-bytes=0" | FileCheck %s --check-prefix=OFF

// Backward computes the gradients of d, c, b, a in that order. Buckets of at
// most 200 bytes follow that order: {d, c, b} (192 bytes) and {a}. Each
// bucket's all-reduce starts, asynchronously, right after its last gradient
// exists, so it overlaps the rest of backward; the stores stay at the end.
// The loss all-reduce is not a gradient and is left alone.
// CHECK-LABEL: func @step
// CHECK:      %[[GD:.*]] = weft.gelu %arg3
// CHECK-NEXT: %[[GC:.*]] = weft.gelu %arg2
// CHECK-NEXT: %[[GB:.*]] = weft.gelu %arg1
// CHECK-NEXT: %[[P:.*]] = weft.pack %[[GD]], %[[GC]], %[[GB]] : (tensor<16xf32>, tensor<16xf32>, tensor<4x4xf32>) -> tensor<48xf32>
// CHECK-NEXT: %[[R:.*]] = weft.all_reduce %[[P]] {async = true, axes = ["dp"], reason = "gradient bucket of 3 tensors (192 bytes)"}
// CHECK-NEXT: %[[GA:.*]] = weft.gelu %arg0
// CHECK-NEXT: %[[RA:.*]] = weft.all_reduce %[[GA]] {async = true, axes = ["dp"]}
// CHECK:      weft.all_reduce %arg4 {axes = ["dp"]}
// CHECK:      weft.param_grad "a", %[[RA]]
// CHECK-NEXT: %[[U:.*]]:3 = weft.unpack %[[R]]
// CHECK-NEXT: weft.param_grad "d", %[[U]]#0
// CHECK-NEXT: weft.param_grad "c", %[[U]]#1
// CHECK-NEXT: weft.param_grad "b", %[[U]]#2
// OFF-NOT:    weft.pack
// OFF-COUNT-4: {async = true
weft.mesh @mesh {axes = ["dp"], shape = array<i64: 2>}
func.func @step(%xa: tensor<16xf32>, %xb: tensor<4x4xf32>, %xc: tensor<16xf32>, %xd: tensor<16xf32>, %l: tensor<f32>) -> tensor<f32> {
  %gd = weft.gelu %xd : tensor<16xf32>
  %gc = weft.gelu %xc : tensor<16xf32>
  %gb = weft.gelu %xb : tensor<4x4xf32>
  %ga = weft.gelu %xa : tensor<16xf32>
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
