//===- HostDevice.h - Functions both backends compile -----------*- C++ -*-===//
//
// WEFT_HOST_DEVICE marks a header function that the CPU kernels and the CUDA
// kernels share, so that both compute the same formula: nvcc compiles it for
// the host and the device, a host compiler as plain inline code.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_HOSTDEVICE_H
#define WEFT_PROGRAM_HOSTDEVICE_H

#if defined(__CUDACC__)
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

#endif // WEFT_PROGRAM_HOSTDEVICE_H
