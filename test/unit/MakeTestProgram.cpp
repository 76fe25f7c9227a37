//===- weft-make-test-program - Write a hand-built GPT program file -------===//
//
// weft-make-test-program OUT [--dtype f32|f64] [--batch B] [--seq S]
//   [--vocab V] [--dim D] [--layers L] [--heads H] [--kv-heads K] [--llama]
// Defaults: the GPT-2 124M shape (12 layers, d=768, 12 heads, vocab 50257)
// with batch 4, seq 256. For benchmarks and weft-run smoke tests; the real
// programs come from weft-compile.
//
//===----------------------------------------------------------------------===//
#include "TestPrograms.h"

#include <cstdlib>
#include <fstream>
#include <iostream>

int main(int Argc, char **Argv) {
  weft::test::GptConfig C;
  C.Batch = 4;
  C.Seq = 256;
  C.Vocab = 50257;
  C.Dim = 768;
  C.Layers = 12;
  C.Heads = 12;
  C.Positions = 1024;
  std::string Out;
  for (int I = 1; I < Argc; ++I) {
    std::string A = Argv[I];
    auto Next = [&]() -> long long {
      if (I + 1 >= Argc) {
        std::cerr << "missing value for " << A << "\n";
        std::exit(2);
      }
      return std::atoll(Argv[++I]);
    };
    if (A == "--dtype" && I + 1 < Argc)
      C.DType = Argv[++I];
    else if (A == "--batch")
      C.Batch = Next();
    else if (A == "--seq")
      C.Seq = C.Positions = Next();
    else if (A == "--vocab")
      C.Vocab = Next();
    else if (A == "--dim")
      C.Dim = Next();
    else if (A == "--layers")
      C.Layers = Next();
    else if (A == "--heads")
      C.Heads = Next();
    else if (A == "--kv-heads")
      C.KvHeads = Next();
    else if (A == "--llama")
      C.Llama = true;
    else if (Out.empty() && A[0] != '-')
      Out = A;
    else {
      std::cerr << "unknown argument " << A << "\n";
      return 2;
    }
  }
  if (Out.empty()) {
    std::cerr << "usage: weft-make-test-program OUT [options]\n";
    return 2;
  }
  std::ofstream F(Out, std::ios::binary);
  F << weft::test::gptProgram(C).file();
  return F ? 0 : 1;
}
