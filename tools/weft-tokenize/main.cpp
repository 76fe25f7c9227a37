//===- weft-tokenize - Byte-level tokenizer for weft-run --data -----------===//
//
// weft-tokenize IN.txt [IN2 ...] -o OUT.bin writes every byte of the inputs,
// in order, as a little-endian uint16 token (vocabulary 256).
//
//===----------------------------------------------------------------------===//
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

static int usage(int Code) {
  (Code ? std::cerr : std::cout)
      << "usage: weft-tokenize IN.txt [IN2 ...] -o OUT.bin\n"
         "Writes every byte of the inputs as a little-endian uint16 token "
         "(byte-level vocabulary of 256).\n";
  return Code;
}

int main(int Argc, char **Argv) {
  std::vector<std::string> Inputs;
  std::string Output;
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
    } else if (A.size() > 1 && A[0] == '-') {
      std::cerr << "weft-tokenize: error: unknown flag '" << A << "'\n";
      return usage(2);
    } else {
      Inputs.push_back(A);
    }
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
