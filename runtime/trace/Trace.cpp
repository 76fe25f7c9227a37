//===- Trace.cpp - Write every rank's timeline as one Chrome trace --------===//
#include "runtime/trace/Trace.h"
#include "runtime/DurableFile.h"
#include "runtime/comm/Communicator.h"

#include <cstring>
#include <fstream>

namespace weft {

namespace {

/// Every rank's Text, on every rank, through two all-gathers (the lengths,
/// then the texts padded to the longest, as 8-byte words).
Status gatherTexts(const Executor &E, const std::string &Text,
                   std::vector<std::string> &All) {
  const int N = E.comm().size();
  if (N == 1) {
    All = {Text};
    return Status::success();
  }
  Expected<const CommGroup *> W = E.comm().group(E.mesh(), E.mesh().Axes);
  if (!W.ok())
    return W.status();
  double Len = double(Text.size());
  std::vector<double> Lens(static_cast<size_t>(N));
  WEFT_RETURN_IF_ERROR(
      E.comm().allGather(**W, &Len, Lens.data(), 1, DType::F64, hostQueue()));
  size_t Words = 0;
  for (double L : Lens)
    Words = std::max(Words, (size_t(L) + 7) / 8);
  std::vector<double> Mine(Words, 0.0), Each(Words * size_t(N));
  std::memcpy(Mine.data(), Text.data(), Text.size());
  WEFT_RETURN_IF_ERROR(E.comm().allGather(**W, Mine.data(), Each.data(), Words,
                                          DType::F64, hostQueue()));
  All.resize(size_t(N));
  for (size_t R = 0; R < size_t(N); ++R)
    All[R].assign(reinterpret_cast<const char *>(Each.data() + R * Words),
                  size_t(Lens[R]));
  return Status::success();
}

} // namespace

Status writeChromeTrace(const Executor &E, const std::string &Path) {
  const Timeline &T = E.timeline();
  std::vector<std::string> All;
  WEFT_RETURN_IF_ERROR(gatherTexts(E, T.chromeTraceEvents(int(E.rank())), All));
  if (E.rank() != 0)
    return Status::success();
  return writeDurably(Path, [&](const std::string &Tmp) {
    std::ofstream Out(Tmp, std::ios::binary | std::ios::trunc);
    Out << "{\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"producer\": "
           "\"weft-run --trace\"},\n\"traceEvents\": [\n";
    for (size_t R = 0; R < All.size(); ++R)
      Out << (R ? ",\n" : "") << All[R];
    Out << "\n]}\n";
    Out.close();
    if (!Out)
      return Status::error("cannot write the trace '" + Path + "'");
    return Status::success();
  });
}

} // namespace weft
