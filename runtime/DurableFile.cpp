//===- DurableFile.cpp - Files that are whole or absent -------------------===//
#include "runtime/DurableFile.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;

namespace weft {

namespace {

std::string errnoText() { return std::strerror(errno); }

/// Test hook: WEFT_TEST_KILL_SAVE=K kills the process at the K-th point
/// (1-based) where a checkpoint file is half-made: written but not synced,
/// synced but not renamed, renamed but its directory not synced, and after
/// a checkpoint directory is exchanged. The fault test uses it to check that
/// a save killed at any of them leaves the previous checkpoint loadable.
void faultPoint() {
  static const long KillAt = [] {
    const char *V = std::getenv("WEFT_TEST_KILL_SAVE");
    return V ? std::atol(V) : 0L;
  }();
  static std::atomic<long> Reached{0};
  if (KillAt > 0 && ++Reached == KillAt)
    ::raise(SIGKILL);
}

Status syncPath(const std::string &Path, int Flags) {
  int Fd = ::open(Path.c_str(), Flags | O_CLOEXEC);
  if (Fd < 0)
    return Status::error("cannot open '" + Path + "' to sync: " + errnoText());
  int Rc = ::fsync(Fd);
  std::string Why = Rc ? errnoText() : "";
  ::close(Fd);
  if (Rc)
    return Status::error("fsync of '" + Path + "' failed: " + Why);
  return Status::success();
}

std::string parentOf(const std::string &Path) {
  fs::path P = fs::path(Path).parent_path();
  return P.empty() ? "." : P.string();
}

} // namespace

Status syncDirectory(const std::string &Dir) {
  return syncPath(Dir, O_RDONLY | O_DIRECTORY);
}

Status writeDurably(const std::string &Path,
                    const std::function<Status(const std::string &)> &Write) {
  fs::path P(Path);
  std::string Tmp = (P.parent_path() / ("." + P.filename().string() + ".tmp-" +
                                        std::to_string(::getpid())))
                        .string();
  auto Cleanup = [&](Status S) {
    std::error_code EC;
    fs::remove(Tmp, EC);
    return S;
  };
  if (Status S = Write(Tmp); !S.ok())
    return Cleanup(S);
  faultPoint();
  if (Status S = syncPath(Tmp, O_RDONLY); !S.ok())
    return Cleanup(S);
  faultPoint();
  if (::rename(Tmp.c_str(), Path.c_str()) != 0)
    return Cleanup(Status::error("cannot rename '" + Tmp + "' to '" + Path +
                                 "': " + errnoText()));
  faultPoint();
  return syncDirectory(parentOf(Path));
}

Status writeTextDurably(const std::string &Path, const std::string &Text) {
  return writeDurably(Path, [&](const std::string &Tmp) {
    std::ofstream Out(Tmp, std::ios::binary | std::ios::trunc);
    Out << Text << "\n";
    Out.close();
    if (!Out)
      return Status::error("cannot write '" + Path + "'");
    return Status::success();
  });
}

Status exchangeOrRename(const std::string &From, const std::string &To) {
  std::error_code EC;
  if (fs::exists(To, EC)) {
    if (::renameat2(AT_FDCWD, From.c_str(), AT_FDCWD, To.c_str(),
                    RENAME_EXCHANGE) != 0)
      return Status::error("cannot exchange '" + From + "' and '" + To +
                           "': " + errnoText());
  } else if (::rename(From.c_str(), To.c_str()) != 0) {
    return Status::error("cannot rename '" + From + "' to '" + To +
                         "': " + errnoText());
  }
  faultPoint();
  return syncDirectory(parentOf(To));
}

uint64_t contentHash(const void *Data, size_t Size) {
  constexpr uint64_t P1 = 0x9e3779b185ebca87ULL, P2 = 0xc2b2ae3d27d4eb4fULL;
  auto Round = [](uint64_t H, uint64_t W) {
    H += W * P2;
    H = (H << 31) | (H >> 33);
    return H * P1;
  };
  const auto *B = static_cast<const unsigned char *>(Data);
  uint64_t L[4] = {P1 + P2, P2, 0, 0 - P1};
  size_t I = 0;
  for (; I + 32 <= Size; I += 32)
    for (int K = 0; K < 4; ++K) {
      uint64_t W;
      std::memcpy(&W, B + I + 8 * K, 8);
      L[K] = Round(L[K], W);
    }
  uint64_t H = Size * P1;
  for (int K = 0; K < 4; ++K)
    H = Round(H ^ Round(0, L[K]), uint64_t(K + 1));
  for (; I < Size; ++I)
    H = Round(H, B[I]);
  H ^= H >> 33;
  H *= P2;
  H ^= H >> 29;
  return H;
}

std::string FileDigest::hashHex() const {
  char Buf[17];
  std::snprintf(Buf, sizeof(Buf), "%016llx", (unsigned long long)Hash);
  return Buf;
}

Expected<FileDigest> digestFile(const std::string &Path) {
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open '" + Path + "'");
  // Hash chunk hashes so that the file need not fit in memory.
  std::vector<char> Buf(size_t(4) << 20);
  FileDigest D;
  uint64_t Acc = 0;
  while (In) {
    In.read(Buf.data(), std::streamsize(Buf.size()));
    size_t N = size_t(In.gcount());
    if (N == 0)
      break;
    uint64_t Chunk[2] = {Acc, contentHash(Buf.data(), N)};
    Acc = contentHash(Chunk, sizeof(Chunk));
    D.Bytes += N;
  }
  if (In.bad())
    return Status::error("cannot read '" + Path + "'");
  D.Hash = Acc;
  return D;
}

} // namespace weft
