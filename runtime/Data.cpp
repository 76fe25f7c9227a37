//===- Data.cpp - Token file loading and batch extraction -----------------===//
#include "runtime/Data.h"

#include <fstream>

namespace weft {

Expected<TokenData> TokenData::fromTokens(std::vector<uint16_t> Tokens,
                                          int64_t Vocab, int64_t Seq,
                                          const std::string &What) {
  if (int64_t(Tokens.size()) < Seq + 1)
    return Status::error(
        What + " has " + std::to_string(Tokens.size()) +
        " tokens, need at least seq+1 = " + std::to_string(Seq + 1));
  for (size_t I = 0; I < Tokens.size(); ++I)
    if (Tokens[I] >= Vocab)
      return Status::error(What + ": token id " + std::to_string(Tokens[I]) +
                           " at position " + std::to_string(I) +
                           " is >= vocab " + std::to_string(Vocab));
  TokenData D;
  D.Tokens = std::move(Tokens);
  return D;
}

Expected<TokenData> TokenData::open(const std::string &Path, int64_t Vocab,
                                    int64_t Seq) {
  std::ifstream In(Path, std::ios::binary | std::ios::ate);
  if (!In)
    return Status::error("cannot open data file '" + Path + "'");
  std::streamoff Bytes = In.tellg();
  if (Bytes < 0)
    return Status::error("cannot read data file '" + Path + "'");
  if (Bytes % 2 != 0)
    return Status::error("data file '" + Path + "' has an odd size (" +
                         std::to_string(Bytes) +
                         " bytes); expected uint16 tokens");
  std::vector<unsigned char> Raw(static_cast<size_t>(Bytes));
  In.seekg(0);
  if (Bytes && !In.read(reinterpret_cast<char *>(Raw.data()), Bytes))
    return Status::error("cannot read data file '" + Path + "'");
  std::vector<uint16_t> Tokens(size_t(Bytes / 2));
  for (size_t I = 0; I < Tokens.size(); ++I)
    Tokens[I] = uint16_t(Raw[2 * I] | (Raw[2 * I + 1] << 8));
  return fromTokens(std::move(Tokens), Vocab, Seq, "data file '" + Path + "'");
}

void TokenData::fillBatch(int64_t Step, int64_t Batch, int64_t Seq,
                          int32_t *Inputs, int32_t *Targets) const {
  fillBlock(Step, Batch, Seq, 0, Batch, 0, Seq, Inputs, Targets);
}

void TokenData::fillBlock(int64_t Step, int64_t Batch, int64_t Seq,
                          int64_t Row0, int64_t Rows, int64_t Col0,
                          int64_t Cols, int32_t *Inputs,
                          int32_t *Targets) const {
  const uint64_t N = Tokens.size();
  for (int64_t I = 0; I < Rows; ++I) {
    uint64_t Start = (uint64_t(Step) * uint64_t(Batch) + uint64_t(Row0 + I)) *
                         uint64_t(Seq) % N +
                     uint64_t(Col0);
    for (int64_t J = 0; J < Cols; ++J) {
      uint64_t Pos = (Start + uint64_t(J)) % N;
      Inputs[I * Cols + J] = Tokens[Pos];
      Targets[I * Cols + J] = Tokens[(Pos + 1) % N];
    }
  }
}

} // namespace weft
