//===- ShmCollectives.cpp - Collectives through shared slots -------------===//
//
// Synchronisation. The ranks pass the same sequence of barriers; call the
// span between two consecutive barriers an interval. Every collective here
// keeps two rules:
//
//  (R1) data a rank writes into its window in interval j is read by peers
//       only in interval j + 1;
//  (R2) the bytes a rank writes in intervals j and j + 1 are disjoint.
//
// Then no read races with a write: a read in interval j + 1 of data written
// in j sees it complete (barrier, with MPI_Win_sync on both sides for memory
// ordering), is not disturbed by the owner's writes in j + 1 (R2), and ends
// before the owner can rewrite those bytes in j + 2 (the barrier that opens
// j + 2 waits for every peer). Step k of a message uses slot (Step + k) % 2:
//
//  all-gather     interval of step k: copy my piece into slot k;
//                 next interval: peers copy it out.         1 barrier a step
//  reduce-scatter interval of step k: copy the piece for peer q into region
//                 q of slot k (q != me); next interval: peer q sums region q
//                 of every peer's slot k with its own Send.  1 barrier a step
//  all-reduce     interval of step k: copy slice q of chunk k into region q
//                 of slot k (q != me); next interval: sum region `me` of
//                 every slot k into Recv and into region `me` of my slot k;
//                 the interval after: peers copy that out.  1 barrier a step,
//                                                           + 1 per call
//
// (R2) within a call: the interval after step k's copy-in writes slot k + 1
// (copy-in), and in an all-reduce also region `me` of slot k (the sum),
// which step k's copy-in (regions != me) did not touch; the next interval
// writes slot k + 2 = slot k (regions != me) and region `me` of slot k + 1.
// Across calls: a call's first interval writes only slot Step % 2; the last
// interval in which a call writes (before its last barrier) writes only slot
// (Step - 1) % 2, and after its last barrier it only reads. So consecutive
// calls, of any of the three kinds, need no barrier between them. Regions
// are fixed per rank, so chunk and slice sizes may change from call to call.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/ShmCollectives.h"
#include "runtime/comm/MpiTypes.h"

#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace weft {
namespace {
using mpi::check;

/// Dst[i] = A[i] + B[i]. Dst may be A or B: iteration i reads element i
/// and then writes it, so iterations are independent (ivdep).
template <typename T> void add(T *Dst, const T *A, const T *B, size_t N) {
#pragma GCC ivdep
  for (size_t I = 0; I < N; ++I)
    Dst[I] = A[I] + B[I];
}

/// Dst[i] = Dst2[i] = A[i] + B[i]; either destination may be A or B.
template <typename T>
void add2(T *Dst, T *Dst2, const T *A, const T *B, size_t N) {
#pragma GCC ivdep
  for (size_t I = 0; I < N; ++I) {
    T V = A[I] + B[I];
    Dst[I] = V;
    Dst2[I] = V;
  }
}

/// Out = S[0] + S[1] + ... + S[n-1] (N elements), summed in rank order
/// whichever rank computes it, so a slice's bits do not depend on who
/// reduced it. Mine (if not null) gets the sum too. Out may be one of the
/// sources (this rank's Send, in place); Mine is none of them, and without
/// Mine Out is none of them either.
template <typename T>
void sumInto(T *Out, T *Mine, const std::vector<const char *> &S, size_t N) {
  auto src = [&](size_t J) { return reinterpret_cast<const T *>(S[J]); };
  const size_t M = S.size();
  if (M == 2) {
    if (Mine)
      add2(Out, Mine, src(0), src(1), N);
    else
      add(Out, src(0), src(1), N);
    return;
  }
  T *Acc = Mine ? Mine : Out;
  add(Acc, src(0), src(1), N);
  for (size_t J = 2; J + 1 < M; ++J)
    add(Acc, Acc, src(J), N);
  if (Mine)
    add2(Out, Mine, Mine, src(M - 1), N);
  else
    add(Out, Out, src(M - 1), N);
}

/// Out = A + B with non-temporal stores (see streamCopy); Out is none of
/// the sources.
void addStream(float *Out, const float *A, const float *B, size_t N) {
  size_t I = 0;
#ifdef __SSE2__
  for (; I < N && (uintptr_t(Out + I) & 15); ++I)
    Out[I] = A[I] + B[I];
  for (; I + 8 <= N; I += 8) {
    _mm_stream_ps(Out + I,
                  _mm_add_ps(_mm_loadu_ps(A + I), _mm_loadu_ps(B + I)));
    _mm_stream_ps(Out + I + 4,
                  _mm_add_ps(_mm_loadu_ps(A + I + 4), _mm_loadu_ps(B + I + 4)));
  }
#endif
  for (; I < N; ++I)
    Out[I] = A[I] + B[I];
}
void addStream(double *Out, const double *A, const double *B, size_t N) {
  size_t I = 0;
#ifdef __SSE2__
  for (; I < N && (uintptr_t(Out + I) & 15); ++I)
    Out[I] = A[I] + B[I];
  for (; I + 4 <= N; I += 4) {
    _mm_stream_pd(Out + I,
                  _mm_add_pd(_mm_loadu_pd(A + I), _mm_loadu_pd(B + I)));
    _mm_stream_pd(Out + I + 2,
                  _mm_add_pd(_mm_loadu_pd(A + I + 2), _mm_loadu_pd(B + I + 2)));
  }
#endif
  for (; I < N; ++I)
    Out[I] = A[I] + B[I];
}

/// sumInto without Mine, written with non-temporal stores: all sources but
/// the last are summed in Scratch (in cache), the last pass streams to Out.
template <typename T>
void sumStream(T *Out, const std::vector<const char *> &S, size_t N,
               T *Scratch) {
  auto src = [&](size_t J) { return reinterpret_cast<const T *>(S[J]); };
  const size_t M = S.size();
  const T *Acc = src(0);
  if (M > 2) {
    add(Scratch, src(0), src(1), N);
    for (size_t J = 2; J + 1 < M; ++J)
      add(Scratch, Scratch, src(J), N);
    Acc = Scratch;
  }
  addStream(Out, Acc, src(M - 1), N);
}

void sumStream(DType T, void *Out, const std::vector<const char *> &S, size_t N,
               void *Scratch) {
  if (T == DType::F64)
    sumStream(static_cast<double *>(Out), S, N, static_cast<double *>(Scratch));
  else
    sumStream(static_cast<float *>(Out), S, N, static_cast<float *>(Scratch));
}

void sumInto(DType T, void *Out, void *Mine, const std::vector<const char *> &S,
             size_t N) {
  if (T == DType::F64)
    sumInto(static_cast<double *>(Out), static_cast<double *>(Mine), S, N);
  else
    sumInto(static_cast<float *>(Out), static_cast<float *>(Mine), S, N);
}

Status needFloat(DType T, const char *What) {
  if (T == DType::F32 || T == DType::F64)
    return Status::success();
  return Status::error(std::string(What) + ": the shared-memory path sums " +
                       "f32 or f64, not " + dtypeName(T));
}

/// memcpy with non-temporal stores: a destination far larger than the cache
/// is written without first being read into it (half the DRAM traffic of
/// a plain store) and without evicting the slots. Callers end with
/// storeFence().
void streamCopy(char *Dst, const char *Src, size_t N) {
#ifdef __SSE2__
  size_t Head = (16 - (uintptr_t(Dst) & 15)) & 15;
  if (N < Head + 64) {
    std::memcpy(Dst, Src, N);
    return;
  }
  std::memcpy(Dst, Src, Head);
  Dst += Head;
  Src += Head;
  N -= Head;
  size_t I = 0;
  for (; I + 64 <= N; I += 64) {
    const __m128i *S = reinterpret_cast<const __m128i *>(Src + I);
    __m128i A = _mm_loadu_si128(S), B = _mm_loadu_si128(S + 1),
            C = _mm_loadu_si128(S + 2), D = _mm_loadu_si128(S + 3);
    __m128i *T = reinterpret_cast<__m128i *>(Dst + I);
    _mm_stream_si128(T, A);
    _mm_stream_si128(T + 1, B);
    _mm_stream_si128(T + 2, C);
    _mm_stream_si128(T + 3, D);
  }
  std::memcpy(Dst + I, Src + I, N - I);
#else
  std::memcpy(Dst, Src, N);
#endif
}

void copy(char *Dst, const char *Src, size_t N) { std::memcpy(Dst, Src, N); }

void storeFence() {
#ifdef __SSE2__
  _mm_sfence();
#endif
}

/// From this many bytes (the larger buffer), the collectives write Recv with
/// non-temporal stores: measured faster from 16 MiB on (2 ranks,
/// test/bench/CommBench.cpp), slower below, where Recv stays in the cache.
constexpr size_t kStreamMinBytes = size_t(16) << 20;
} // namespace

std::array<uint64_t, 3> shmIdentity() {
  std::array<uint64_t, 3> Key{0, 0, 0};
  struct stat St;
  if (::stat("/dev/shm", &St) == 0) {
    Key[0] = uint64_t(St.st_dev);
    Key[1] = uint64_t(St.st_ino);
  }
  if (const char *Node = std::getenv("WEFT_NODE_ID"))
    Key[2] = std::hash<std::string>()(Node) | 1;
  return Key;
}

Expected<ShmCollectives *> ShmCollectives::create(MPI_Comm Group,
                                                  size_t SlotKB) {
  std::unique_ptr<ShmCollectives> S(new ShmCollectives());
  int GroupSize = 0, GroupRank = 0;
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_size(Group, &GroupSize), "MPI_Comm_size"));
  WEFT_RETURN_IF_ERROR(
      check(MPI_Comm_rank(Group, &GroupRank), "MPI_Comm_rank"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_split_type(Group, MPI_COMM_TYPE_SHARED, 0,
                                                 MPI_INFO_NULL, &S->Shm),
                             "MPI_Comm_split_type"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_rank(S->Shm, &S->Rank), "MPI_Comm_rank"));
  WEFT_RETURN_IF_ERROR(check(MPI_Comm_size(S->Shm, &S->Size), "MPI_Comm_size"));
  // MPI calls ranks of one host "shared", but their /dev/shm may still
  // differ (containers, mount namespaces; a two-node simulation): mapping
  // such a peer's window would fault. The ranks compare the identity of
  // their /dev/shm (device and inode) and WEFT_NODE_ID, and take the MPI
  // path unless all agree.
  std::array<uint64_t, 3> Key = shmIdentity();
  std::vector<uint64_t> Keys(size_t(S->Size) * 3);
  WEFT_RETURN_IF_ERROR(
      check(MPI_Allgather(Key.data(), 3, MPI_UINT64_T, Keys.data(), 3,
                          MPI_UINT64_T, S->Shm),
            "MPI_Allgather"));
  bool SameShm = true;
  for (int Q = 0; Q < S->Size; ++Q)
    SameShm &= std::equal(Key.begin(), Key.end(), Keys.begin() + 3 * Q);
  // Usable only when the whole group shares this node, ranked as in the
  // group. Every rank gets the same answer and the same slot size (the
  // largest asked for), so all take the same path.
  int Mine[2] = {SameShm && S->Size == GroupSize && S->Rank == GroupRank ? 0
                                                                         : 1,
                 int(std::clamp<size_t>(SlotKB, 4, size_t(1) << 20))};
  int All[2] = {1, 0};
  WEFT_RETURN_IF_ERROR(check(
      MPI_Allreduce(Mine, All, 2, MPI_INT, MPI_MAX, Group), "MPI_Allreduce"));
  S->Usable = All[0] == 0 && GroupSize > 1;
  if (!S->Usable)
    return S.release();

  S->SlotBytes = size_t(All[1]) << 10;
  S->RegionBytes =
      std::max<size_t>(64, S->SlotBytes / size_t(S->Size) / 64 * 64);
  S->SlotBytes = std::max(S->SlotBytes, S->RegionBytes * size_t(S->Size));
  MPI_Info Info = MPI_INFO_NULL;
  WEFT_RETURN_IF_ERROR(check(MPI_Info_create(&Info), "MPI_Info_create"));
  // Each rank's window on its own pages.
  MPI_Info_set(Info, "alloc_shared_noncontig", "true");
  void *Base = nullptr;
  Status Made = check(MPI_Win_allocate_shared(MPI_Aint(2 * S->SlotBytes), 1,
                                              Info, S->Shm, &Base, &S->Win),
                      "MPI_Win_allocate_shared");
  MPI_Info_free(&Info);
  WEFT_RETURN_IF_ERROR(Made);
  WEFT_RETURN_IF_ERROR(
      check(MPI_Win_lock_all(MPI_MODE_NOCHECK, S->Win), "MPI_Win_lock_all"));
  std::memset(Base, 0, 2 * S->SlotBytes); // fault the pages in once
  S->Segments.assign(S->Size, nullptr);
  S->Scratch.resize(S->RegionBytes / sizeof(double));
  for (int Q = 0; Q < S->Size; ++Q) {
    MPI_Aint QSize = 0;
    int Disp = 0;
    void *Ptr = nullptr;
    WEFT_RETURN_IF_ERROR(
        check(MPI_Win_shared_query(S->Win, Q, &QSize, &Disp, &Ptr),
              "MPI_Win_shared_query"));
    S->Segments[Q] = static_cast<char *>(Ptr);
  }
  WEFT_RETURN_IF_ERROR(S->barrier());
  return S.release();
}

ShmCollectives::~ShmCollectives() {
  if (Win != MPI_WIN_NULL) {
    MPI_Win_unlock_all(Win);
    MPI_Win_free(&Win);
  }
  if (Shm != MPI_COMM_NULL)
    MPI_Comm_free(&Shm);
}

Status ShmCollectives::barrier() {
  WEFT_RETURN_IF_ERROR(check(MPI_Win_sync(Win), "MPI_Win_sync"));
  WEFT_RETURN_IF_ERROR(check(MPI_Barrier(Shm), "MPI_Barrier"));
  return check(MPI_Win_sync(Win), "MPI_Win_sync");
}

Status ShmCollectives::allReduce(const void *Send, void *Recv, size_t Count,
                                 DType T) {
  WEFT_RETURN_IF_ERROR(needFloat(T, "all-reduce"));
  if (Count == 0)
    return Status::success();
  const size_t E = dtypeBytes(T), Chunk = RegionBytes / E * size_t(Size);
  const size_t K = (Count + Chunk - 1) / Chunk;
  const char *In = static_cast<const char *>(Send);
  char *Out = static_cast<char *>(Recv);
  const bool Stream = Count * E >= kStreamMinBytes;
  auto put = Stream ? streamCopy : copy;
  // Slice Q of chunk J: elements [Lo, Hi) of the message.
  auto slice = [&](size_t J, int Q, size_t &Lo, size_t &Hi) {
    size_t Off = J * Chunk, L = std::min(Chunk, Count - Off);
    Lo = Off + L * size_t(Q) / size_t(Size);
    Hi = Off + L * size_t(Q + 1) / size_t(Size);
  };
  auto copyIn = [&](size_t J) {
    char *Mine = slot(Rank, Step + J);
    for (int Q = 0; Q < Size; ++Q) {
      if (Q == Rank)
        continue;
      size_t Lo, Hi;
      slice(J, Q, Lo, Hi);
      std::memcpy(Mine + size_t(Q) * RegionBytes, In + Lo * E, (Hi - Lo) * E);
    }
  };
  std::vector<const char *> Sources(size_t(Size), nullptr);
  auto reduce = [&](size_t J) {
    size_t Lo, Hi;
    slice(J, Rank, Lo, Hi);
    const size_t At = size_t(Rank) * RegionBytes;
    for (int Q = 0; Q < Size; ++Q)
      Sources[Q] = Q == Rank ? In + Lo * E : slot(Q, Step + J) + At;
    char *Mine = slot(Rank, Step + J) + At;
    if (Stream) {
      sumInto(T, Mine, nullptr, Sources, Hi - Lo);
      streamCopy(Out + Lo * E, Mine, (Hi - Lo) * E);
    } else {
      sumInto(T, Out + Lo * E, Mine, Sources, Hi - Lo);
    }
  };
  auto copyOut = [&](size_t J) {
    for (int Q = 0; Q < Size; ++Q) {
      if (Q == Rank)
        continue;
      size_t Lo, Hi;
      slice(J, Q, Lo, Hi);
      put(Out + Lo * E, slot(Q, Step + J) + size_t(Q) * RegionBytes,
          (Hi - Lo) * E);
    }
  };
  copyIn(0);
  WEFT_RETURN_IF_ERROR(barrier());
  for (size_t I = 0; I < K; ++I) {
    reduce(I);
    if (I + 1 < K)
      copyIn(I + 1);
    WEFT_RETURN_IF_ERROR(barrier());
    copyOut(I);
  }
  Step += K;
  storeFence();
  return Status::success();
}

Status ShmCollectives::reduceScatter(const void *Send, void *Recv, size_t Count,
                                     DType T) {
  WEFT_RETURN_IF_ERROR(needFloat(T, "reduce-scatter"));
  if (Count == 0)
    return Status::success();
  const size_t E = dtypeBytes(T), Piece = RegionBytes / E;
  const size_t K = (Count + Piece - 1) / Piece;
  const char *In = static_cast<const char *>(Send);
  char *Out = static_cast<char *>(Recv);
  const bool Stream = size_t(Size) * Count * E >= kStreamMinBytes;
  // Step J covers elements [Lo, Lo + L) of every block.
  auto range = [&](size_t J, size_t &Lo, size_t &L) {
    Lo = J * Piece;
    L = std::min(Piece, Count - Lo);
  };
  auto copyIn = [&](size_t J) {
    size_t Lo, L;
    range(J, Lo, L);
    char *Mine = slot(Rank, Step + J);
    for (int Q = 0; Q < Size; ++Q)
      if (Q != Rank)
        std::memcpy(Mine + size_t(Q) * RegionBytes,
                    In + (size_t(Q) * Count + Lo) * E, L * E);
  };
  std::vector<const char *> Sources(size_t(Size), nullptr);
  copyIn(0);
  WEFT_RETURN_IF_ERROR(barrier());
  for (size_t I = 0; I < K; ++I) {
    size_t Lo, L;
    range(I, Lo, L);
    for (int Q = 0; Q < Size; ++Q)
      Sources[Q] = Q == Rank ? In + (size_t(Rank) * Count + Lo) * E
                             : slot(Q, Step + I) + size_t(Rank) * RegionBytes;
    if (Stream)
      sumStream(T, Out + Lo * E, Sources, L, Scratch.data());
    else
      sumInto(T, Out + Lo * E, nullptr, Sources, L);
    if (I + 1 < K) {
      copyIn(I + 1);
      WEFT_RETURN_IF_ERROR(barrier());
    }
  }
  Step += K;
  storeFence();
  return Status::success();
}

Status ShmCollectives::allGather(const void *Send, void *Recv, size_t Count,
                                 DType T) {
  const size_t Bytes = Count * dtypeBytes(T);
  if (Bytes == 0)
    return Status::success();
  const size_t K = (Bytes + SlotBytes - 1) / SlotBytes;
  char *Out = static_cast<char *>(Recv);
  const char *In =
      Send ? static_cast<const char *>(Send) : Out + size_t(Rank) * Bytes;
  auto put = size_t(Size) * Bytes >= kStreamMinBytes ? streamCopy : copy;
  auto copyIn = [&](size_t J) {
    size_t Lo = J * SlotBytes, L = std::min(SlotBytes, Bytes - Lo);
    char *Mine = slot(Rank, Step + J);
    std::memcpy(Mine, In + Lo, L);
    if (Send)
      put(Out + size_t(Rank) * Bytes + Lo, Mine, L);
  };
  copyIn(0);
  WEFT_RETURN_IF_ERROR(barrier());
  for (size_t I = 0; I < K; ++I) {
    if (I + 1 < K)
      copyIn(I + 1);
    size_t Lo = I * SlotBytes, L = std::min(SlotBytes, Bytes - Lo);
    for (int Q = 0; Q < Size; ++Q)
      if (Q != Rank)
        put(Out + size_t(Q) * Bytes + Lo, slot(Q, Step + I), L);
    if (I + 1 < K)
      WEFT_RETURN_IF_ERROR(barrier());
  }
  Step += K;
  storeFence();
  return Status::success();
}

} // namespace weft
