//===- Samples.h - whole samples from .npy files, or drawn ------*- C++ -*-===//
//
// The sample readers of weft-run: token rows and targets (labels, one per
// sample, or a regression's floats) from .npy files (--tokens, --targets),
// and pseudo-random ones for --grad-check without data.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_DATA_SAMPLES_H
#define WEFT_RUNTIME_DATA_SAMPLES_H

#include "program/Program.h"
#include "program/Status.h"
#include "runtime/data/Data.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

/// --tokens: whole samples' ids [N, seq], each below the vocabulary.
Expected<std::vector<int32_t>> loadTokenRows(const std::string &TokensNpy,
                                             const Program &P);

/// --tokens and --targets: whole samples [N, seq] from two .npy files, the
/// targets [N] when the program reads one per sample (a classifier's),
/// floats when it is a regression's. MaskedLoss: the whole program's (a
/// pipeline stage's view may hold no cross-entropy); without it a -100
/// target is refused.
Expected<SampleData> loadSamples(const std::string &TokensNpy,
                                 const std::string &TargetsNpy,
                                 const Program &P, bool MaskedLoss);

/// --attention-mask: the samples' attention mask [N, seq] (1 a token, 0
/// padding, Hugging Face's meaning), set on S. Refused: another shape than
/// the samples', a value other than 0 and 1, a row whose tokens are not one
/// run (padding inside a sequence) or none, and a padded position whose
/// target is not -100, each naming the [row, column].
Status loadAttentionMask(const std::string &MaskNpy, const Program &P,
                         SampleData &S);

/// --token-type-ids: the samples' token types [N, seq], each a row of the
/// program's token-type table ([0, TokenTypeRows)), set on S.
Status loadTokenTypes(const std::string &TypesNpy, const Program &P,
                      SampleData &S);

/// Deterministic pseudo-random tokens (Batch * Seq + 1) below the vocabulary.
std::vector<uint32_t> randomTokens(const Program &P, uint64_t Seed);

/// One batch of pseudo-random samples and targets within their bounds, for
/// a program whose targets are not the next tokens (--grad-check).
Expected<SampleData> randomSamples(const Program &P, uint64_t Seed);

} // namespace weft

#endif // WEFT_RUNTIME_DATA_SAMPLES_H
