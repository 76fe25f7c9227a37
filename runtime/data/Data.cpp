//===- Data.cpp - Token file loading and batch extraction -----------------===//
#include "runtime/data/Data.h"
#include "program/Hash.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace weft {

namespace {

const char *fileKindName(mode_t Mode) {
  if (S_ISDIR(Mode))
    return "a directory";
  if (S_ISFIFO(Mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(Mode))
    return "a character device";
  if (S_ISBLK(Mode))
    return "a block device";
  if (S_ISSOCK(Mode))
    return "a socket";
  return "not a regular file";
}

} // namespace

Expected<TokenData> TokenData::fromTokens(std::vector<uint32_t> Tokens,
                                          int64_t Vocab, int64_t Seq,
                                          const std::string &What) {
  if (int64_t(Tokens.size()) < Seq + 1)
    return Status::error(
        What + " has " + std::to_string(Tokens.size()) +
        " tokens, need at least seq+1 = " + std::to_string(Seq + 1));
  for (size_t I = 0; I < Tokens.size(); ++I)
    if (int64_t(Tokens[I]) >= Vocab)
      return Status::error(What + ": token id " + std::to_string(Tokens[I]) +
                           " at position " + std::to_string(I) +
                           " is >= vocab " + std::to_string(Vocab));
  TokenData D;
  D.Tokens = std::move(Tokens);
  return D;
}

Expected<TokenData> TokenData::open(const std::string &Path, int64_t Vocab,
                                    int64_t Seq) {
  // A directory opens as a stream whose size reads as 2^63-1, and opening a
  // FIFO blocks until a writer appears: look before opening.
  struct stat St;
  if (::stat(Path.c_str(), &St) != 0)
    return Status::error("cannot open data file '" + Path +
                         "': " + std::strerror(errno));
  if (!S_ISREG(St.st_mode))
    return Status::error("data file '" + Path + "' is " +
                         fileKindName(St.st_mode) +
                         ", expected a regular file of token ids");
  std::ifstream In(Path, std::ios::binary);
  if (!In)
    return Status::error("cannot open data file '" + Path + "'");
  std::string Raw(size_t(St.st_size), '\0');
  if (!Raw.empty() && !In.read(Raw.data(), std::streamsize(Raw.size())))
    return Status::error("cannot read data file '" + Path + "'");
  return fromBytes(Raw, Vocab, Seq, "data file '" + Path + "'");
}

Expected<TokenData> TokenData::fromBytes(const std::string &Raw, int64_t Vocab,
                                         int64_t Seq, const std::string &What) {
  auto Byte = [&](size_t At) { return uint32_t(uint8_t(Raw[At])); };
  auto Word = [&](size_t At) {
    return Byte(At) | Byte(At + 1) << 8 | Byte(At + 2) << 16 |
           Byte(At + 3) << 24;
  };
  size_t Start = 0, Width = 2;
  std::string Format = "uint16 tokens (nanoGPT, no header)";
  if (Raw.size() >= 4 && int32_t(Word(0)) == LlmcMagic) {
    if (Raw.size() < LlmcHeaderBytes)
      return Status::error(What +
                           " starts with llm.c's magic 20240520 but is " +
                           std::to_string(Raw.size()) +
                           " bytes, shorter than its 1024-byte header");
    uint32_t Version = Word(4), Count = Word(8);
    if (Version != 1 && Version != 2)
      return Status::error(What + ": llm.c header version " +
                           std::to_string(Version) +
                           ", expected 1 (uint16 ids) or 2 (uint32 ids)");
    Start = LlmcHeaderBytes;
    Width = Version == 1 ? 2 : 4;
    Format =
        Version == 1 ? "llm.c version 1 (uint16)" : "llm.c version 2 (uint32)";
    if ((Raw.size() - Start) != uint64_t(Count) * Width)
      return Status::error(
          What + ": its llm.c header says " + std::to_string(Count) +
          " tokens of " + std::to_string(Width) + " bytes, but " +
          std::to_string(Raw.size() - Start) + " bytes follow the header");
  }
  if ((Raw.size() - Start) % Width != 0)
    return Status::error(What + " has an odd size (" +
                         std::to_string(Raw.size()) + " bytes); expected " +
                         Format);
  std::vector<uint32_t> Tokens((Raw.size() - Start) / Width);
  for (size_t I = 0; I < Tokens.size(); ++I) {
    size_t At = Start + I * Width;
    Tokens[I] = Width == 2 ? Byte(At) | Byte(At + 1) << 8 : Word(At);
  }
  return fromTokens(std::move(Tokens), Vocab, Seq, What);
}

void TokenData::fillBatch(int64_t Step, int64_t Batch, int64_t Seq,
                          int32_t *Inputs, int32_t *Targets) const {
  fillBlock(Step, Batch, Seq, 0, Batch, 0, Seq, Inputs, Targets);
}

bool Sampling::parse(const std::string &Name, Mode &Out) {
  for (Mode M : {Contiguous, Random, Shuffled})
    if (Name == name(M)) {
      Out = M;
      return true;
    }
  return false;
}

const char *Sampling::name(Mode M) {
  return M == Random ? "random" : M == Shuffled ? "shuffled" : "contiguous";
}

namespace {
// A bijection of [0, N): a balanced Feistel network over the smallest
// even number of bits covering N, keyed by (seed, epoch), cycle-walking
// values past N back into range (Black and Rogaway, 2002). No table: an
// epoch of millions of windows costs nothing to hold.
uint64_t permute(uint64_t X, uint64_t N, uint64_t Key) {
  int Bits = 2;
  while (Bits < 64 && (uint64_t(1) << Bits) < N)
    Bits += 2;
  const int Half = Bits / 2;
  const uint64_t Mask = (uint64_t(1) << Half) - 1;
  do {
    uint64_t L = X >> Half, R = X & Mask;
    for (uint64_t Round = 0; Round < 4; ++Round) {
      uint64_t F = splitmix64(Key ^ (R * 0x9E3779B97F4A7C15ull) ^ Round) & Mask;
      uint64_t T = L ^ F;
      L = R;
      R = T;
    }
    X = (L << Half) | R;
  } while (X >= N);
  return X;
}
} // namespace

uint64_t TokenData::windowStart(uint64_t G, int64_t Seq) const {
  const uint64_t N = Tokens.size(), S = uint64_t(Seq);
  switch (Draw.M) {
  case Sampling::Contiguous:
    return G * S % N;
  case Sampling::Random: // fromBytes guarantees N >= Seq + 1
    return splitmix64(splitmix64(Draw.Seed ^ 0x5A4D504C45ull) ^ G) % (N - S);
  case Sampling::Shuffled: {
    const uint64_t Windows = (N - 1) / S, Epoch = G / Windows;
    return permute(G % Windows, Windows, splitmix64(Draw.Seed) ^ Epoch) * S;
  }
  }
  return 0;
}

std::string TokenData::describe() const {
  std::string D = Sampling::name(Draw.M);
  if (Draw.M != Sampling::Contiguous)
    D += " seed " + std::to_string(Draw.Seed);
  return D + " over " + std::to_string(Tokens.size()) + " tokens";
}

void TokenData::fillBlock(int64_t Step, int64_t Batch, int64_t Seq,
                          int64_t Row0, int64_t Rows, int64_t Col0,
                          int64_t Cols, int32_t *Inputs,
                          int32_t *Targets) const {
  const uint64_t N = Tokens.size();
  for (int64_t I = 0; I < Rows; ++I) {
    uint64_t Start =
        windowStart(uint64_t(Step) * uint64_t(Batch) + uint64_t(Row0 + I),
                    Seq) +
        uint64_t(Col0);
    for (int64_t J = 0; J < Cols; ++J) {
      uint64_t Pos = (Start + uint64_t(J)) % N;
      Inputs[I * Cols + J] = Tokens[Pos];
      Targets[I * Cols + J] = Tokens[(Pos + 1) % N];
      // A document's end predicts nothing: its next token is another's.
      if (DocumentEos >= 0 && int64_t(Tokens[Pos]) == DocumentEos)
        Targets[I * Cols + J] = -100;
    }
  }
}

namespace {
// A uniform double in [0, 1) from a word's top 53 bits.
double unit(uint64_t X) { return double(X >> 11) * 0x1.0p-53; }

// Position N's draw: hidden iff unit(X) < MaskProb; X then picks the input.
uint64_t draw(const MaskedLmSpec &M, uint64_t N) {
  return splitmix64(splitmix64(uint64_t(M.Seed)) ^ N);
}

// The sample-position index the draws are keyed by (wrapping, as
// fillBlock's positions do).
uint64_t positionIndex(int64_t Step, int64_t Batch, int64_t Seq, int64_t Row,
                       int64_t Col) {
  return (uint64_t(Step) * uint64_t(Batch) + uint64_t(Row)) * uint64_t(Seq) +
         uint64_t(Col);
}
} // namespace

void TokenData::fillMaskedBlock(int64_t Step, int64_t Batch, int64_t Seq,
                                int64_t Row0, int64_t Rows, int64_t Col0,
                                int64_t Cols, const MaskedLmSpec &M,
                                int64_t Vocab, int32_t *Inputs,
                                int32_t *Targets) const {
  // The unshifted tokens: fillBlock's inputs (its targets are dropped).
  fillBlock(Step, Batch, Seq, Row0, Rows, Col0, Cols, Inputs, Targets);
  for (int64_t I = 0; I < Rows; ++I)
    for (int64_t J = 0; J < Cols; ++J) {
      int32_t &In = Inputs[I * Cols + J], &Tgt = Targets[I * Cols + J];
      uint64_t X = draw(M, positionIndex(Step, Batch, Seq, Row0 + I, Col0 + J));
      if (!(unit(X) < M.MaskProb)) {
        Tgt = -100;
        continue;
      }
      Tgt = In;
      uint64_t Y = splitmix64(X);
      double U = unit(Y);
      if (U < 0.8)
        In = int32_t(M.MaskToken);
      else if (U < 0.9)
        In = int32_t(splitmix64(Y) % uint64_t(Vocab));
    }
}

void TokenData::fillStepBlock(int64_t Step, int64_t Batch, int64_t Seq,
                              int64_t Row0, int64_t Rows, int64_t Col0,
                              int64_t Cols, const MaskedLmSpec *Masked,
                              int64_t Vocab, int32_t *Inputs,
                              int32_t *Targets) const {
  if (Masked)
    fillMaskedBlock(Step, Batch, Seq, Row0, Rows, Col0, Cols, *Masked, Vocab,
                    Inputs, Targets);
  else
    fillBlock(Step, Batch, Seq, Row0, Rows, Col0, Cols, Inputs, Targets);
}

int64_t TokenData::countedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                                  const MaskedLmSpec *Masked) const {
  if (Masked)
    return countMaskedTargets(Step, Batch, Seq, *Masked);
  if (DocumentEos < 0)
    return Batch * Seq;
  // Packed documents: every position but an Eos predicts.
  int64_t N = 0;
  for (int64_t R = 0; R < Batch; ++R) {
    uint64_t Start =
        windowStart(uint64_t(Step) * uint64_t(Batch) + uint64_t(R), Seq);
    for (int64_t J = 0; J < Seq; ++J)
      N +=
          int64_t(Tokens[(Start + uint64_t(J)) % Tokens.size()]) != DocumentEos;
  }
  return N;
}

Status BatchSource::fillDocumentPositions(int64_t Step, int64_t Batch,
                                          int64_t Seq, int64_t Vocab,
                                          int32_t *Out) const {
  if (DocumentEos < 0)
    return Status::error("the program packs documents, but no end-of-document "
                         "id was set on its batches");
  const size_t N = size_t(Batch * Seq);
  std::vector<int32_t> Tokens(N), Targets(N);
  fillStepBlock(Step, Batch, Seq, 0, Batch, 0, Seq, nullptr, Vocab,
                Tokens.data(), Targets.data());
  documentPositions(Tokens.data(), Batch, Seq, DocumentEos, Out);
  return Status::success();
}

Status SampleData::fillDocumentPositions(int64_t Step, int64_t Batch,
                                         int64_t Seq, int64_t Vocab,
                                         int32_t *Out) const {
  if (Mask.empty())
    return BatchSource::fillDocumentPositions(Step, Batch, Seq, Vocab, Out);
  // Runs of equal mask values: the tokens one document, each padding run
  // another (a causal model's tokens never read the padding after them).
  for (int64_t R = 0; R < Batch; ++R) {
    const int32_t *M = Mask.data() + rowOf(Step, Batch, R) * Seq;
    int32_t Pos = 0;
    for (int64_t S = 0; S < Seq; ++S) {
      Pos = S > 0 && M[S] == M[S - 1] ? Pos + 1 : 0;
      Out[R * Seq + S] = Pos;
    }
  }
  return Status::success();
}

Status BatchSource::fillKeySpans(int64_t, int64_t, int64_t, int32_t *) const {
  return Status::error("the program's attention reads each row's attention "
                       "mask (the model's attention_mask input): give "
                       "weft-run --tokens, --targets and --attention-mask");
}

Status SampleData::fillKeySpans(int64_t Step, int64_t Batch, int64_t Seq,
                                int32_t *Out) const {
  if (Mask.empty())
    return BatchSource::fillKeySpans(Step, Batch, Seq, Out);
  // loadAttentionMask checked each row is one run of tokens.
  for (int64_t R = 0; R < Batch; ++R) {
    const int32_t *M = Mask.data() + rowOf(Step, Batch, R) * Seq;
    int32_t F = 0, E = int32_t(Seq);
    while (F < E && !M[F])
      ++F;
    while (E > F && !M[E - 1])
      --E;
    Out[2 * R] = F;
    Out[2 * R + 1] = E;
  }
  return Status::success();
}

Status BatchSource::fillTokenTypes(int64_t, int64_t, int64_t, int32_t *) const {
  return Status::error("the program reads each position's token type (the "
                       "model's token_type_ids input): give weft-run "
                       "--tokens, --targets and --token-type-ids");
}

Status SampleData::fillTokenTypes(int64_t Step, int64_t Batch, int64_t Seq,
                                  int32_t *Out) const {
  if (Types.empty())
    return BatchSource::fillTokenTypes(Step, Batch, Seq, Out);
  for (int64_t R = 0; R < Batch; ++R)
    std::copy_n(Types.data() + rowOf(Step, Batch, R) * Seq, Seq, Out + R * Seq);
  return Status::success();
}

void documentPositions(const int32_t *Tokens, int64_t Rows, int64_t Seq,
                       int64_t Eos, int32_t *Out) {
  for (int64_t R = 0; R < Rows; ++R) {
    int32_t Pos = 0;
    for (int64_t S = 0; S < Seq; ++S) {
      Out[R * Seq + S] = Pos;
      Pos = Tokens[R * Seq + S] == Eos ? 0 : Pos + 1;
    }
  }
}

namespace {
// " at [row, column]" of flat index I in rows of Len ("[row]" for Len 1).
std::string at(size_t I, size_t Len) {
  return " at [" + std::to_string(I / Len) +
         (Len > 1 ? ", " + std::to_string(I % Len) : "") + "]";
}

// Whole samples' token ids: rows of Seq, each id in [0, Vocab). Their rows,
// or an error naming What and the [row, column].
Expected<size_t> tokenRows(const std::vector<int32_t> &Tokens, int64_t Seq,
                           int64_t Vocab, const std::string &What) {
  if (Seq < 1 || Tokens.empty() || Tokens.size() % size_t(Seq) != 0)
    return Status::error(What + ": " + std::to_string(Tokens.size()) +
                         " token ids are not rows of seq " +
                         std::to_string(Seq));
  for (size_t I = 0; I < Tokens.size(); ++I)
    if (Tokens[I] < 0 || Tokens[I] >= Vocab)
      return Status::error(What + ": token id " + std::to_string(Tokens[I]) +
                           at(I, size_t(Seq)) + " is outside [0, " +
                           std::to_string(Vocab) + ")");
  return Tokens.size() / size_t(Seq);
}
} // namespace

Expected<SampleData> SampleData::fromRows(std::vector<int32_t> Tokens,
                                          std::vector<int32_t> Targets,
                                          int64_t Seq, int64_t Vocab,
                                          int64_t Classes, bool PerSample,
                                          const std::string &What) {
  Expected<size_t> R = tokenRows(Tokens, Seq, Vocab, What);
  if (!R.ok())
    return R.status();
  const size_t Rows = *R;
  if (Targets.size() != (PerSample ? Rows : Tokens.size()))
    return Status::error(What + ": " + std::to_string(Targets.size()) +
                         " targets for " + std::to_string(Tokens.size()) +
                         " token ids" +
                         (PerSample ? " in " + std::to_string(Rows) +
                                          " samples (one target per sample)"
                                    : " (one target per token)"));
  for (size_t I = 0; I < Targets.size(); ++I)
    if ((Targets[I] < 0 || Targets[I] >= Classes) && Targets[I] != -100)
      return Status::error(What + ": target " + std::to_string(Targets[I]) +
                           at(I, PerSample ? 1 : size_t(Seq)) +
                           " is outside [0, " + std::to_string(Classes) +
                           ") and is not -100 (ignored)");
  SampleData D;
  D.NumRows = int64_t(Rows);
  D.RowLength = Seq;
  D.PerSample = PerSample;
  D.Tokens = std::move(Tokens);
  D.Targets = std::move(Targets);
  return D;
}

Expected<SampleData> SampleData::fromFloatRows(std::vector<int32_t> Tokens,
                                               std::vector<char> Targets,
                                               size_t RowBytes, int64_t Seq,
                                               int64_t Vocab,
                                               const std::string &What) {
  Expected<size_t> R = tokenRows(Tokens, Seq, Vocab, What);
  if (!R.ok())
    return R.status();
  const size_t Rows = *R;
  if (RowBytes == 0 || Targets.size() != Rows * RowBytes)
    return Status::error(What + ": " + std::to_string(Targets.size()) +
                         " bytes of targets for " + std::to_string(Rows) +
                         " samples of " + std::to_string(RowBytes) +
                         " bytes each");
  SampleData D;
  D.NumRows = int64_t(Rows);
  D.RowLength = Seq;
  D.Tokens = std::move(Tokens);
  D.FloatTargets = std::move(Targets);
  D.RowBytes = RowBytes;
  return D;
}

void SampleData::fillFloatTargets(int64_t Step, int64_t Batch, int64_t Row0,
                                  int64_t Rows, void *Out) const {
  char *To = static_cast<char *>(Out);
  for (int64_t I = 0; I < Rows; ++I)
    std::memcpy(To + size_t(I) * RowBytes,
                FloatTargets.data() +
                    size_t(rowOf(Step, Batch, Row0 + I)) * RowBytes,
                RowBytes);
}

int64_t SampleData::rowOf(int64_t Step, int64_t Batch, int64_t Row) const {
  return int64_t((uint64_t(Step) * uint64_t(Batch) + uint64_t(Row)) %
                 uint64_t(NumRows));
}

void SampleData::fillStepBlock(int64_t Step, int64_t Batch, int64_t,
                               int64_t Row0, int64_t Rows, int64_t Col0,
                               int64_t Cols, const MaskedLmSpec *, int64_t,
                               int32_t *Inputs, int32_t *Targets) const {
  for (int64_t I = 0; I < Rows; ++I) {
    const int64_t Row = rowOf(Step, Batch, Row0 + I);
    const size_t From = size_t(Row * RowLength + Col0);
    std::copy_n(Tokens.data() + From, Cols, Inputs + I * Cols);
    if (RowBytes)
      continue; // float targets: fillFloatTargets
    if (PerSample)
      Targets[I] = this->Targets[size_t(Row)];
    else
      std::copy_n(this->Targets.data() + From, Cols, Targets + I * Cols);
  }
}

int64_t SampleData::countedTargets(int64_t Step, int64_t Batch, int64_t,
                                   const MaskedLmSpec *) const {
  if (RowBytes)
    return 0; // float targets: no masked loss reads them (the loader)
  int64_t N = 0;
  const int64_t Len = PerSample ? 1 : RowLength;
  for (int64_t R = 0; R < Batch; ++R) {
    const int32_t *T = Targets.data() + rowOf(Step, Batch, R) * Len;
    N += Len - std::count(T, T + Len, -100);
  }
  return N;
}

int64_t countMaskedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                           const MaskedLmSpec &M) {
  int64_t N = 0;
  for (int64_t R = 0; R < Batch; ++R)
    for (int64_t C = 0; C < Seq; ++C)
      N += unit(draw(M, positionIndex(Step, Batch, Seq, R, C))) < M.MaskProb;
  return N;
}

} // namespace weft
