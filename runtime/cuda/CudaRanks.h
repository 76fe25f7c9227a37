//===- CudaRanks.h - Which GPU a rank uses, and how ranks talk --*- C++ -*-===//
#ifndef WEFT_RUNTIME_CUDA_CUDARANKS_H
#define WEFT_RUNTIME_CUDA_CUDARANKS_H

#include "runtime/comm/Communicator.h"

#include <memory>

namespace weft {

/// Makes this rank's CUDA device current and returns the communicator for
/// its tensors: device L for the rank of local index L on its node
/// (OMPI_COMM_WORLD_LOCAL_RANK, else SLURM_LOCALID, else 0), or L modulo
/// the device count when Share; an error names both numbers when the node
/// has too few devices. Host itself for one rank, NCCL over Host for one
/// GPU per rank, Host with host-staged buffers when ranks share GPUs (or
/// NCCL is missing): Host is replaced. On an error Host is left as it was,
/// so that the caller can end the job through it. A build without CUDA
/// returns an error. TimeoutSeconds (0: none) bounds NCCL's waits: its
/// communicators' init, and a wait for the device while NCCL collectives
/// run (runtime/comm/DeviceWait.h).
Status cudaRankCommunicator(std::unique_ptr<Communicator> &Host, bool Share,
                            double TimeoutSeconds);

} // namespace weft

#endif // WEFT_RUNTIME_CUDA_CUDARANKS_H
