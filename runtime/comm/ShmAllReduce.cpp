//===- ShmAllReduce.cpp - zero-copy all-reduce within one node ------------===//
#include "runtime/comm/ShmAllReduce.h"

#include <cstring>
#include <memory>

namespace weft {
namespace {
Status check(int Rc, const char *Call) {
  if (Rc == MPI_SUCCESS)
    return Status::success();
  char Msg[MPI_MAX_ERROR_STRING];
  int Len = 0;
  MPI_Error_string(Rc, Msg, &Len);
  return Status::error(std::string(Call) + " failed: " + std::string(Msg, Len));
}

template <typename T>
void reduceSlice(const std::vector<char *> &Segments, size_t Lo, size_t Hi,
                 T *Recv, T *Mine) {
  const T *First = reinterpret_cast<const T *>(Segments[0]);
  for (size_t I = Lo; I < Hi; ++I)
    Recv[I] = First[I];
  for (size_t Q = 1; Q < Segments.size(); ++Q) {
    const T *Peer = reinterpret_cast<const T *>(Segments[Q]);
    for (size_t I = Lo; I < Hi; ++I)
      Recv[I] += Peer[I];
  }
  std::memcpy(Mine + Lo, Recv + Lo, (Hi - Lo) * sizeof(T));
}
} // namespace

Expected<ShmAllReduce *> ShmAllReduce::create(MPI_Comm Group) {
  std::unique_ptr<ShmAllReduce> S(new ShmAllReduce());
  int GroupSize = 0;
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_size(Group, &GroupSize), "MPI_Comm_size"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_split_type(Group, MPI_COMM_TYPE_SHARED, 0,
                                                 MPI_INFO_NULL, &S->Shm),
                             "MPI_Comm_split_type"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_rank(S->Shm, &S->Rank), "MPI_Comm_rank"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_size(S->Shm, &S->Size), "MPI_Comm_size"));
  // Usable only when the whole group shares this node (every rank sees the
  // same answer, so all take the same path).
  int Local = S->Size == GroupSize, All = 0;
  WEFT_RETURN_IF_ERROR(
      check(MPI_Allreduce(&Local, &All, 1, MPI_INT, MPI_MIN, Group),
            "MPI_Allreduce"));
  S->Usable = All == 1 && GroupSize > 1;
  return S.release();
}

ShmAllReduce::~ShmAllReduce() {
  if (Win != MPI_WIN_NULL) {
    MPI_Win_unlock_all(Win);
    MPI_Win_free(&Win);
  }
  if (Shm != MPI_COMM_NULL)
    MPI_Comm_free(&Shm);
}

Status ShmAllReduce::reserve(size_t Bytes) {
  if (Bytes <= Capacity)
    return Status::success();
  if (Win != MPI_WIN_NULL) {
    WEFT_RETURN_IF_ERROR(check(MPI_Win_unlock_all(Win), "MPI_Win_unlock_all"));
    WEFT_RETURN_IF_ERROR(check(MPI_Win_free(&Win), "MPI_Win_free"));
  }
  void *Base = nullptr;
  WEFT_RETURN_IF_ERROR(
      check(MPI_Win_allocate_shared(MPI_Aint(Bytes), 1, MPI_INFO_NULL, Shm,
                                    &Base, &Win),
            "MPI_Win_allocate_shared"));
  WEFT_RETURN_IF_ERROR(
      check(MPI_Win_lock_all(MPI_MODE_NOCHECK, Win), "MPI_Win_lock_all"));
  Segments.assign(Size, nullptr);
  for (int Q = 0; Q < Size; ++Q) {
    MPI_Aint QSize = 0;
    int Disp = 0;
    void *Ptr = nullptr;
    WEFT_RETURN_IF_ERROR(
        check(MPI_Win_shared_query(Win, Q, &QSize, &Disp, &Ptr),
              "MPI_Win_shared_query"));
    Segments[Q] = static_cast<char *>(Ptr);
  }
  Capacity = Bytes;
  return Status::success();
}

Status ShmAllReduce::run(const void *Send, void *Recv, size_t Count, DType T) {
  size_t E = dtypeBytes(T), Bytes = Count * E;
  WEFT_RETURN_IF_ERROR(reserve(Bytes));
  auto fence = [&]() -> Status {
    WEFT_RETURN_IF_ERROR(check(MPI_Win_sync(Win), "MPI_Win_sync"));
    return check(MPI_Barrier(Shm), "MPI_Barrier");
  };
  // 1. Everyone's input into its own window.
  std::memcpy(Segments[Rank], Send, Bytes);
  WEFT_RETURN_IF_ERROR(fence());
  // 2. Reduce this rank's slice from all windows (into Recv and the window).
  auto sliceOf = [&](int Q, size_t &Lo, size_t &Hi) {
    Lo = Count * Q / Size;
    Hi = Count * (Q + 1) / Size;
  };
  size_t Lo, Hi;
  sliceOf(Rank, Lo, Hi);
  if (T == DType::F64)
    reduceSlice<double>(Segments, Lo, Hi, static_cast<double *>(Recv),
                        reinterpret_cast<double *>(Segments[Rank]));
  else
    reduceSlice<float>(Segments, Lo, Hi, static_cast<float *>(Recv),
                       reinterpret_cast<float *>(Segments[Rank]));
  WEFT_RETURN_IF_ERROR(fence());
  // 3. The peers' reduced slices out of their windows.
  for (int Q = 0; Q < Size; ++Q) {
    if (Q == Rank)
      continue;
    sliceOf(Q, Lo, Hi);
    std::memcpy(static_cast<char *>(Recv) + Lo * E, Segments[Q] + Lo * E,
                (Hi - Lo) * E);
  }
  // Nobody refills its window until every peer has read it.
  return fence();
}

} // namespace weft
