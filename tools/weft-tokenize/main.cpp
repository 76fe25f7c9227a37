//===- weft-tokenize - Byte-level tokenizer for weft-run --data -----------===//
//
// weft-tokenize IN.txt [IN2 ...] -o OUT.bin writes every byte of the inputs,
// in order, as a little-endian uint16 token (vocabulary 256).
// weft-tokenize --ids IDS.txt -o OUT.bin writes token ids another tokenizer
// produced (decimal, whitespace separated): raw uint16 when every id fits,
// else llm.c's version-2 format with uint32 ids (runtime/data/Data.h).
//
//===----------------------------------------------------------------------===//
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

static int usage(int Code) {
  (Code ? std::cerr : std::cout)
      << "usage: weft-tokenize IN.txt [IN2 ...] -o OUT.bin\n"
         "       weft-tokenize --ids IDS.txt -o OUT.bin\n"
         "Writes every byte of the inputs as a little-endian uint16 token "
         "(byte-level vocabulary of 256).\n"
         "With --ids, reads decimal token ids (whitespace separated, from any "
         "tokenizer) and writes raw uint16 when every id is below 65536, "
         "else llm.c's header format version 2 with uint32 ids.\n";
  return Code;
}

static void putWord(std::vector<char> &Out, uint32_t V) {
  for (int B = 0; B < 4; ++B)
    Out.push_back(char((V >> (8 * B)) & 0xff));
}

// --ids: one file of decimal ids to the narrowest format that holds them.
static int writeIds(const std::string &Input, const std::string &Output) {
  std::ifstream In(Input);
  if (!In) {
    std::cerr << "weft-tokenize: error: cannot open '" << Input << "'\n";
    return 1;
  }
  std::vector<uint32_t> Ids;
  std::string Word;
  uint32_t Max = 0;
  while (In >> Word) {
    char *End = nullptr;
    unsigned long long V = std::strtoull(Word.c_str(), &End, 10);
    if (Word.empty() || *End || Word[0] == '-' || V > UINT32_MAX) {
      std::cerr << "weft-tokenize: error: '" << Input << "': token "
                << Ids.size() << " is '" << Word
                << "', expected a decimal id below 2^32\n";
      return 1;
    }
    Ids.push_back(uint32_t(V));
    Max = std::max(Max, uint32_t(V));
  }
  bool Wide = Max > 0xffff;
  std::vector<char> Bytes;
  if (Wide) {
    putWord(Bytes, 20240520); // llm.c magic
    putWord(Bytes, 2);        // version 2: uint32 ids
    putWord(Bytes, uint32_t(Ids.size()));
    Bytes.resize(1024, 0);
  }
  for (uint32_t Id : Ids) {
    Bytes.push_back(char(Id & 0xff));
    Bytes.push_back(char((Id >> 8) & 0xff));
    if (Wide) {
      Bytes.push_back(char((Id >> 16) & 0xff));
      Bytes.push_back(char((Id >> 24) & 0xff));
    }
  }
  std::ofstream Out(Output, std::ios::binary | std::ios::trunc);
  Out.write(Bytes.data(), std::streamsize(Bytes.size()));
  Out.close();
  if (!Out) {
    std::cerr << "weft-tokenize: error: cannot write '" << Output << "'\n";
    return 1;
  }
  std::cout << "weft-tokenize: wrote " << Ids.size() << " tokens to " << Output
            << (Wide ? " (llm.c version 2, uint32: max id " +
                           std::to_string(Max) + ")"
                     : " (uint16)")
            << "\n";
  return 0;
}

int main(int Argc, char **Argv) {
  std::vector<std::string> Inputs;
  std::string Output, IdsInput;
  for (int I = 1; I < Argc; ++I) {
    std::string A = Argv[I];
    if (A == "--help" || A == "-h")
      return usage(0);
    if (A == "-o") {
      if (I + 1 >= Argc) {
        std::cerr << "weft-tokenize: error: -o needs a file name\n";
        return 2;
      }
      Output = Argv[++I];
    } else if (A == "--ids") {
      if (I + 1 >= Argc) {
        std::cerr << "weft-tokenize: error: --ids needs a file name\n";
        return 2;
      }
      IdsInput = Argv[++I];
    } else if (A.size() > 1 && A[0] == '-') {
      std::cerr << "weft-tokenize: error: unknown flag '" << A << "'\n";
      return usage(2);
    } else {
      Inputs.push_back(A);
    }
  }
  // Opening the output truncates it: refuse an output that is an input.
  std::vector<std::string> AllInputs = Inputs;
  if (!IdsInput.empty())
    AllInputs.push_back(IdsInput);
  for (const std::string &In : AllInputs) {
    std::error_code EC;
    if (std::filesystem::equivalent(In, Output, EC)) {
      std::cerr << "weft-tokenize: error: the output '" << Output
                << "' is the input '" << In << "'\n";
      return 1;
    }
  }
  if (!IdsInput.empty()) {
    if (!Inputs.empty() || Output.empty()) {
      std::cerr << "weft-tokenize: error: --ids takes one file and -o OUT\n";
      return usage(2);
    }
    return writeIds(IdsInput, Output);
  }
  if (Inputs.empty() || Output.empty()) {
    std::cerr << "weft-tokenize: error: need at least one input and -o OUT\n";
    return usage(2);
  }
  std::ofstream Out(Output, std::ios::binary | std::ios::trunc);
  if (!Out) {
    std::cerr << "weft-tokenize: error: cannot create '" << Output << "'\n";
    return 1;
  }
  size_t Total = 0;
  std::vector<char> Buf(1 << 16), Tok(2 << 16);
  for (const std::string &Path : Inputs) {
    std::ifstream In(Path, std::ios::binary);
    if (!In) {
      std::cerr << "weft-tokenize: error: cannot open '" << Path << "'\n";
      return 1;
    }
    while (In) {
      In.read(Buf.data(), std::streamsize(Buf.size()));
      std::streamsize N = In.gcount();
      for (std::streamsize K = 0; K < N; ++K) {
        Tok[2 * K] = Buf[K];
        Tok[2 * K + 1] = 0;
      }
      Out.write(Tok.data(), 2 * N);
      Total += size_t(N);
    }
    if (In.bad()) {
      std::cerr << "weft-tokenize: error: cannot read '" << Path << "'\n";
      return 1;
    }
  }
  Out.close();
  if (!Out) {
    std::cerr << "weft-tokenize: error: cannot write '" << Output << "'\n";
    return 1;
  }
  std::cout << "weft-tokenize: wrote " << Total << " tokens to " << Output
            << "\n";
  return 0;
}
