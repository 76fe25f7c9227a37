//===- Data.h - token files (nanoGPT and llm.c .bin) -----------*- C++ -*-===//
//
// Two formats, told apart by the first four bytes:
//  - nanoGPT: raw little-endian uint16 token ids, no header;
//  - llm.c: a header of 256 little-endian int32 (magic 20240520, version,
//    token count, zeros), then the ids: version 1 uint16, version 2 uint32
//    (Llama 3's 128,256-token vocabulary needs ids past 65,535).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_DATA_H
#define WEFT_RUNTIME_DATA_H

#include "program/Program.h"
#include "program/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// Where a step's batch comes from: a token file (TokenData) or whole
/// samples (SampleData). Executor::loadBatch and the trainer read either.
class BatchSource {
public:
  virtual ~BatchSource() = default;
  /// The rank's block of step Step's global Batch x Seq batch: local row i
  /// is global sample Row0+i, local column j global position Col0+j.
  /// Masked: a masked-LM program's recipe (null for next-token), which a
  /// token file applies and whole samples, whose targets are given, do not.
  virtual void fillStepBlock(int64_t Step, int64_t Batch, int64_t Seq,
                             int64_t Row0, int64_t Rows, int64_t Col0,
                             int64_t Cols, const MaskedLmSpec *Masked,
                             int64_t Vocab, int32_t *Inputs,
                             int32_t *Targets) const = 0;
  /// The targets of step Step's global batch that are not -100: a masked
  /// loss's divisor.
  virtual int64_t countedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                                 const MaskedLmSpec *Masked) const = 0;
  /// Whether fillStepBlock writes one target per sample (Rows of them, a
  /// classifier's labels) rather than Rows x Cols.
  virtual bool sampleTargets() const { return false; }
  /// Float targets (a regression's): the bytes of one sample's, 0 when
  /// the targets are ids or labels.
  virtual size_t floatTargetRowBytes() const { return 0; }
  /// The float targets of step Step's global samples Row0 .. Row0+Rows, one
  /// row of floatTargetRowBytes() each, to Out.
  virtual void fillFloatTargets(int64_t, int64_t, int64_t, int64_t,
                                void *) const {}
  /// Rows pack documents ending with token Eos: a token file's target of
  /// an Eos (the next document's first token) becomes -100 and is not
  /// counted; given targets are the caller's.
  virtual void setDocuments(int64_t Eos) { DocumentEos = Eos; }
  /// Each position's index in its document, for step Step's whole batch
  /// [Batch, Seq] (documentPositions): the documents end with the Eos of
  /// setDocuments, or (SampleData with a mask) are the runs of equal mask
  /// values.
  virtual Status fillDocumentPositions(int64_t Step, int64_t Batch, int64_t Seq,
                                       int64_t Vocab, int32_t *Out) const;
  /// Key padding: each row of step Step's batch's tokens [F, E) in its
  /// attention mask, 2 a row (a SampleData with a mask; else an error).
  virtual Status fillKeySpans(int64_t Step, int64_t Batch, int64_t Seq,
                              int32_t *Out) const;
  /// Step Step's batch's token types [Batch, Seq] (a SampleData given
  /// them; else an error).
  virtual Status fillTokenTypes(int64_t Step, int64_t Batch, int64_t Seq,
                                int32_t *Out) const;

protected:
  int64_t DocumentEos = -1;
};

/// Each position's index in its document, for the rows of a packed batch:
/// Out[r * Seq + s] counts the tokens since the last Eos before s in row r
/// (an Eos ends its document: the next token starts at 0).
void documentPositions(const int32_t *Tokens, int64_t Rows, int64_t Seq,
                       int64_t Eos, int32_t *Out);

/// How a token file's windows are drawn, each a pure function of (seed,
/// the sample's index in the run, Step * Batch + row), so a run resumed at
/// step k reads exactly what the uninterrupted run read there:
///  - Contiguous: sample g starts at g * Seq (mod the file), in file order;
///  - Random: at a uniform start in [0, size - Seq - 1] (nanoGPT's
///    get_batch: windows may overlap, every start equally likely);
///  - Shuffled: the file cut into (size - 1) / Seq disjoint windows, each
///    epoch visiting every window once in its own seeded order.
struct Sampling {
  enum Mode { Contiguous, Random, Shuffled } M = Contiguous;
  uint64_t Seed = 0;
  /// "contiguous", "random" or "shuffled"; false for another name.
  static bool parse(const std::string &Name, Mode &Out);
  static const char *name(Mode M);
};

/// A whole token file in memory, validated against the vocabulary.
class TokenData : public BatchSource {
public:
  /// Reads PATH and parses it (fromBytes). Refuses anything that is not a
  /// regular file (a directory, a FIFO, a device), naming the path.
  static Expected<TokenData> open(const std::string &Path, int64_t Vocab,
                                  int64_t Seq);
  /// Parses a whole token file image; refuses ids >= Vocab (naming the first
  /// position and value) and files with fewer than Seq+1 tokens. What names
  /// the file in messages ("data file 'x.bin'").
  static Expected<TokenData> fromBytes(const std::string &Bytes, int64_t Vocab,
                                       int64_t Seq, const std::string &What);
  /// Wraps tokens already in memory (tests, --grad-check without --data).
  static Expected<TokenData> fromTokens(std::vector<uint32_t> Tokens,
                                        int64_t Vocab, int64_t Seq,
                                        const std::string &What = "tokens");
  static Expected<TokenData> fromTokens(const std::vector<uint16_t> &Tokens,
                                        int64_t Vocab, int64_t Seq,
                                        const std::string &What = "tokens") {
    return fromTokens(std::vector<uint32_t>(Tokens.begin(), Tokens.end()),
                      Vocab, Seq, What);
  }

  /// Writes sample i of step k for i < Batch: inputs are positions
  /// [(k*B+i)*S, +S), targets the same shifted by one, modulo size().
  void fillBatch(int64_t Step, int64_t Batch, int64_t Seq, int32_t *Tokens,
                 int32_t *Targets) const;
  /// The rank's block of step k's global batch (docs/program-format.md,
  /// "Sharded inputs"): local row i is global sample Row0+i, local column j
  /// global position Col0+j, sampled as fillBatch does for the global
  /// Batch x Seq. Writes Rows x Cols.
  void fillBlock(int64_t Step, int64_t Batch, int64_t Seq, int64_t Row0,
                 int64_t Rows, int64_t Col0, int64_t Cols, int32_t *Tokens,
                 int32_t *Targets) const;
  /// A masked-LM batch's block (docs/program-format.md, "Masked-LM
  /// batches"): the samples of fillBlock, each position hidden with M's
  /// probability by a pure function of M's seed and the position's index in
  /// the step's global batch, n = (Step*Batch + row)*Seq + col. A hidden
  /// position's input becomes the mask token (80%), a uniform id below
  /// Vocab (10%) or stays (10%), and its target is its token; every other
  /// target is -100 (ignored).
  void fillMaskedBlock(int64_t Step, int64_t Batch, int64_t Seq, int64_t Row0,
                       int64_t Rows, int64_t Col0, int64_t Cols,
                       const MaskedLmSpec &M, int64_t Vocab, int32_t *Inputs,
                       int32_t *Targets) const;
  size_t size() const { return Tokens.size(); }
  void setSampling(const Sampling &S) { Draw = S; }
  const Sampling &sampling() const { return Draw; }
  /// The first token of global sample G (= Step * Batch + row) of Seq.
  uint64_t windowStart(uint64_t G, int64_t Seq) const;
  /// What reads the batches, for a checkpoint's trainer_state.json: a run
  /// resumed from it must read them the same way ("shuffled seed 7 over
  /// 123456 tokens").
  std::string describe() const;

  void fillStepBlock(int64_t Step, int64_t Batch, int64_t Seq, int64_t Row0,
                     int64_t Rows, int64_t Col0, int64_t Cols,
                     const MaskedLmSpec *Masked, int64_t Vocab, int32_t *Inputs,
                     int32_t *Targets) const override;
  int64_t countedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                         const MaskedLmSpec *Masked) const override;

private:
  std::vector<uint32_t> Tokens;
  Sampling Draw;
};

/// Whole samples, each Seq token ids and Seq targets, or one target per
/// sample (weft-run --tokens and --targets: .npy arrays [N, Seq], and [N,
/// Seq] or [N]); a target of -100 counts for nothing (a masked loss's
/// ignored position). Step k's sample i is row (k*Batch + i) mod N. No
/// recipe applies: the targets are given.
class SampleData : public BatchSource {
public:
  /// Refuses arrays of different rows, rows that are not Seq long, no
  /// rows, ids outside [0, Vocab) and targets outside [0, Classes) other
  /// than -100, naming What and the [row, column]. PerSample: Targets holds
  /// one per row.
  static Expected<SampleData> fromRows(std::vector<int32_t> Tokens,
                                       std::vector<int32_t> Targets,
                                       int64_t Seq, int64_t Vocab,
                                       int64_t Classes, bool PerSample,
                                       const std::string &What = "samples");
  /// Whole samples with float targets (a regression's): RowBytes of them
  /// per sample, in the program's dtype. Refuses ids outside [0, Vocab) and
  /// targets that are not whole rows of the samples.
  static Expected<SampleData> fromFloatRows(std::vector<int32_t> Tokens,
                                            std::vector<char> Targets,
                                            size_t RowBytes, int64_t Seq,
                                            int64_t Vocab,
                                            const std::string &What);
  int64_t rows() const { return NumRows; }
  bool sampleTargets() const override { return PerSample; }
  size_t floatTargetRowBytes() const override { return RowBytes; }
  void fillFloatTargets(int64_t Step, int64_t Batch, int64_t Row0, int64_t Rows,
                        void *Out) const override;

  void fillStepBlock(int64_t Step, int64_t Batch, int64_t Seq, int64_t Row0,
                     int64_t Rows, int64_t Col0, int64_t Cols,
                     const MaskedLmSpec *Masked, int64_t Vocab, int32_t *Inputs,
                     int32_t *Targets) const override;
  int64_t countedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                         const MaskedLmSpec *Masked) const override;
  /// Padded rows: each sample's attention mask [rows, Seq] (1 a token, 0
  /// padding), checked by loadAttentionMask (Samples.h).
  void setMask(std::vector<int32_t> M) { Mask = std::move(M); }
  const std::vector<int32_t> &targetRows() const { return Targets; }
  Status fillDocumentPositions(int64_t Step, int64_t Batch, int64_t Seq,
                               int64_t Vocab, int32_t *Out) const override;
  Status fillKeySpans(int64_t Step, int64_t Batch, int64_t Seq,
                      int32_t *Out) const override;
  Status fillTokenTypes(int64_t Step, int64_t Batch, int64_t Seq,
                        int32_t *Out) const override;
  void setTokenTypes(std::vector<int32_t> T) { Types = std::move(T); }

private:
  std::vector<int32_t> Tokens, Targets, Mask, Types;
  int64_t NumRows = 0, RowLength = 0;
  bool PerSample = false;
  std::vector<char> FloatTargets; // RowBytes per sample
  size_t RowBytes = 0;
  // The file row of step Step's global sample Row.
  int64_t rowOf(int64_t Step, int64_t Batch, int64_t Row) const;
};

/// How many positions of step Step's global Batch x Seq batch M hides (the
/// masked-LM loss's divisor; no token is read).
int64_t countMaskedTargets(int64_t Step, int64_t Batch, int64_t Seq,
                           const MaskedLmSpec &M);

/// llm.c's token file header: 256 int32, the first three magic, version and
/// token count.
constexpr int32_t LlmcMagic = 20240520;
constexpr size_t LlmcHeaderBytes = 256 * 4;

} // namespace weft

#endif // WEFT_RUNTIME_DATA_H
