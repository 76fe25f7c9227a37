//===- CudaQueue.cpp - A queue on a CUDA stream ---------------------------===//
#include "runtime/cuda/CudaQueue.h"
#include "runtime/cuda/HostPlans.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>

namespace weft {

Status cudaStatus(cudaError_t E, const std::string &What) {
  if (E == cudaSuccess)
    return Status::success();
  return Status::error(What + ": " + cudaGetErrorName(E) + " (" +
                       cudaGetErrorString(E) + ")");
}

Expected<Progress> cudaProgress(cudaError_t Query, const char *What) {
  if (Query == cudaErrorNotReady)
    return Progress::Running;
  WEFT_RETURN_IF_ERROR(cudaStatus(Query, What));
  return Progress::Done;
}

namespace {
std::function<Status(double)> &streamWaitCheck() {
  static std::function<Status(double)> Check;
  return Check;
}
} // namespace

void setStreamWaitCheck(std::function<Status(double Waited)> Check) {
  streamWaitCheck() = std::move(Check);
}

Expected<std::unique_ptr<CudaQueue>>
CudaQueue::create(cuda::KernelError *Errors, InstructionNamer Namer) {
  std::unique_ptr<CudaQueue> Q(new CudaQueue());
  WEFT_RETURN_IF_ERROR(
      cudaStatus(cudaStreamCreateWithFlags(&Q->Stream, cudaStreamNonBlocking),
                 "cudaStreamCreateWithFlags"));
  if (Errors) {
    WEFT_RETURN_IF_ERROR(
        cudaStatus(cudaMallocHost(reinterpret_cast<void **>(&Q->HostErrors),
                                  sizeof(cuda::KernelError)),
                   "cudaMallocHost (kernel error slot)"));
    Q->Errors = Errors;
  }
  Q->Namer = std::move(Namer);
  return Q;
}

CudaQueue::~CudaQueue() {
  if (Stream) {
    cudaStreamSynchronize(Stream);
    cudaStreamDestroy(Stream);
  }
  auto Free = [](Staging &S) {
    if (S.Buffer)
      cudaFreeHost(S.Buffer);
    if (S.Read)
      cudaEventDestroy(S.Read);
  };
  for (Staging &S : Large)
    Free(S);
  for (Staging &S : Small)
    Free(S);
  if (HostErrors)
    cudaFreeHost(HostErrors);
}

Status CudaQueue::stagingFor(size_t Bytes, Staging *&Out) {
  const bool IsSmall = Bytes <= SmallStagingBytes;
  int &Next = IsSmall ? NextSmall : NextLarge;
  Staging &S = IsSmall ? Small[Next] : Large[Next];
  Next = (Next + 1) % int(IsSmall ? std::size(Small) : std::size(Large));
  if (S.InFlight) {
    S.InFlight = false;
    WEFT_RETURN_IF_ERROR(cudaStatus(cudaEventSynchronize(S.Read),
                                    "cudaEventSynchronize (staging)"));
  }
  if (!S.Read)
    WEFT_RETURN_IF_ERROR(
        cudaStatus(cudaEventCreateWithFlags(&S.Read, cudaEventDisableTiming),
                   "cudaEventCreateWithFlags (staging)"));
  if (S.Bytes < Bytes) {
    if (S.Buffer)
      cudaFreeHost(S.Buffer);
    S.Buffer = nullptr;
    S.Bytes = 0;
    WEFT_RETURN_IF_ERROR(cudaStatus(cudaMallocHost(&S.Buffer, Bytes),
                                    "cudaMallocHost (" + std::to_string(Bytes) +
                                        " bytes of staging)"));
    S.Bytes = Bytes;
  }
  Out = &S;
  return Status::success();
}

Status CudaQueue::copyToDevice(void *Device, const void *Host, size_t Bytes) {
  auto *D = static_cast<char *>(Device);
  const auto *H = static_cast<const char *>(Host);
  for (size_t At = 0; At < Bytes;) {
    const size_t N = std::min(Bytes - At, MaxStagingBytes);
    Staging *S = nullptr;
    WEFT_RETURN_IF_ERROR(stagingFor(N, S));
    std::memcpy(S->Buffer, H + At, N);
    WEFT_RETURN_IF_ERROR(cudaStatus(
        cudaMemcpyAsync(D + At, S->Buffer, N, cudaMemcpyHostToDevice, Stream),
        "cudaMemcpyAsync (host to device, " + std::to_string(Bytes) +
            " bytes)"));
    WEFT_RETURN_IF_ERROR(cudaStatus(cudaEventRecord(S->Read, Stream),
                                    "cudaEventRecord (staging)"));
    S->InFlight = true;
    At += N;
  }
  return Status::success();
}

Status CudaQueue::copyToHost(void *Host, const void *Device, size_t Bytes) {
  if (!Bytes)
    return Status::success();
  return cudaStatus(
      cudaMemcpyAsync(Host, Device, Bytes, cudaMemcpyDeviceToHost, Stream),
      "cudaMemcpyAsync (device to host, " + std::to_string(Bytes) + " bytes)");
}

// cudaMemcpy is undefined on overlapping ranges; Queue promises memmove
// (memmovePieces cuts the copy into pieces that do not overlap).
Status CudaQueue::copyOnDevice(void *Dst, const void *Src, size_t Bytes) {
  auto *D = static_cast<char *>(Dst);
  auto *S = static_cast<const char *>(Src);
  for (const CopyPiece &P :
       memmovePieces(reinterpret_cast<uintptr_t>(D),
                     reinterpret_cast<uintptr_t>(S), Bytes))
    WEFT_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(D + P.Offset, S + P.Offset, P.Bytes,
                                   cudaMemcpyDeviceToDevice, Stream),
                   "cudaMemcpyAsync (device to device, " +
                       std::to_string(P.Bytes) + " bytes)"));
  return Status::success();
}

Status CudaQueue::fillZero(void *Device, size_t Bytes) {
  if (!Bytes)
    return Status::success();
  return cudaStatus(cudaMemsetAsync(Device, 0, Bytes, Stream),
                    "cudaMemsetAsync");
}

CudaEventState::~CudaEventState() {
  if (Native)
    cudaEventDestroy(Native);
}

Status CudaQueue::record(Event &E) {
  auto *S = dynamic_cast<CudaEventState *>(E.Native.get());
  if (!S) {
    auto New = std::make_unique<CudaEventState>();
    WEFT_RETURN_IF_ERROR(cudaStatus(
        cudaEventCreateWithFlags(&New->Native, cudaEventDisableTiming),
        "cudaEventCreateWithFlags"));
    S = New.get();
    E.Native = std::move(New);
  }
  return cudaStatus(cudaEventRecord(S->Native, Stream), "cudaEventRecord");
}

// An event a synchronous (host) queue recorded is complete already.
Status CudaQueue::waitFor(const Event &E) {
  auto *S = dynamic_cast<const CudaEventState *>(E.Native.get());
  if (!S)
    return Status::success();
  return cudaStatus(cudaStreamWaitEvent(Stream, S->Native, 0),
                    "cudaStreamWaitEvent");
}

Status CudaQueue::synchronize() {
  if (Errors)
    WEFT_RETURN_IF_ERROR(
        cudaStatus(cudaMemcpyAsync(HostErrors, Errors, sizeof(*HostErrors),
                                   cudaMemcpyDeviceToHost, Stream),
                   "cudaMemcpyAsync (kernel error slot)"));
  if (const std::function<Status(double)> &Check = streamWaitCheck())
    WEFT_RETURN_IF_ERROR(waitPolling(
        [this] {
          return cudaProgress(cudaStreamQuery(Stream), "cudaStreamQuery");
        },
        Check));
  else
    WEFT_RETURN_IF_ERROR(
        cudaStatus(cudaStreamSynchronize(Stream), "cudaStreamSynchronize"));
  if (!Errors || HostErrors->Instruction1 == 0)
    return Status::success();
  const cuda::KernelError K = *HostErrors;
  // Reset in stream order, so that no later kernel's report is lost.
  WEFT_RETURN_IF_ERROR(
      cudaStatus(cudaMemsetAsync(Errors, 0, sizeof(*Errors), Stream),
                 "cudaMemsetAsync (kernel error slot)"));
  WEFT_RETURN_IF_ERROR(
      cudaStatus(cudaStreamSynchronize(Stream), "cudaStreamSynchronize"));
  const unsigned long long Key = ~K.NotKey;
  const long long Index = static_cast<long long>(Key >> 32);
  const int32_t Value = static_cast<int32_t>(Key & 0xffffffffull);
  const int I = K.Instruction1 - 1;
  std::string Where =
      Namer ? Namer(I) : "instructions[" + std::to_string(I) + "]";
  const bool Id = K.Code == cuda::IdOutOfRange;
  return Status::error(
      Where + (Id ? ": id " : ": target ") + std::to_string(Value) +
      (Id ? " at position " : " at row ") + std::to_string(Index) +
      " is outside [0, " + std::to_string(K.Limit) + ")");
}

} // namespace weft
