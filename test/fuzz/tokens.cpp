//===- tokens.cpp - Fuzz the token-file reader (nanoGPT and llm.c) --------===//
//
// The first two bytes choose the vocabulary and sequence length; the rest is
// the file. A file that loads is sampled as weft-run samples batches.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/Data.h"

#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  if (Size < 2)
    return 0;
  int64_t Vocab = int64_t(Data[0]) << 9 | 1; // 1 to 130,561
  int64_t Seq = Data[1] % 16 + 1;
  std::string Bytes(reinterpret_cast<const char *>(Data) + 2, Size - 2);
  weft::Expected<weft::TokenData> D =
      weft::TokenData::fromBytes(Bytes, Vocab, Seq, "fuzz");
  if (!D.ok())
    return 0;
  const int64_t Batch = 3;
  std::vector<int32_t> In(Batch * Seq), Tgt(Batch * Seq);
  for (int64_t Step = 0; Step < 3; ++Step)
    D->fillBatch(Step, Batch, Seq, In.data(), Tgt.data());
  D->fillBlock(int64_t(1) << 40, Batch, Seq, 1, 2, 0, Seq, In.data(),
               Tgt.data());
  return 0;
}
