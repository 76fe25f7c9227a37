//===- Pointwise.h - the generic path's elementwise functions ---*- C++ -*-===//
//
// weft.pointwise's and weft.binary's functions (the generic path, docs/
// design.md decision 20) with their derivatives, as PyTorch's autograd takes
// them (relu'(0) = 0, abs'(0) = 0). Header only and dependency free: the
// dialect's verifier, the program loader, the CPU kernels and the CUDA
// kernels share one definition (the math functions are WEFT_HOST_DEVICE).
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_PROGRAM_POINTWISE_H
#define WEFT_PROGRAM_POINTWISE_H

#include "program/HostDevice.h"

#include <cmath>
#include <string>

namespace weft {

enum class PointwiseFn {
  Neg,
  Exp,
  Log,
  Sqrt,
  Reciprocal,
  Tanh,
  Sigmoid,
  Relu,
  Erf,
  Sin,
  Cos,
  Abs,
  // Masks (format version 10): 1 where true, 0 where false; no gradient.
  Not,   // x == 0
  IsNan, // "isnan"
  // With a scalar c:
  AddScalar,  // "add": x + c
  SubScalar,  // "sub": x - c
  RsubScalar, // "rsub": c - x
  MulScalar,  // "mul": x * c
  DivScalar,  // "div": x / c
  RdivScalar, // "rdiv": c / x
  PowScalar,  // "pow": x ^ c
  // Format version 10, torch.clamp's halves (its gradient: dy where the
  // bound does not bind, the bound itself included):
  ClampMin, // "clamp_min": x < c ? c : x
  ClampMax, // "clamp_max": x > c ? c : x
};

/// Eq to Or (format version 10) compute masks: 1 where true, 0 where
/// false (And and Or read a nonzero operand as true), with no gradient.
/// Max and Min (version 10) are torch.maximum and torch.minimum: NaN if
/// either operand is, and a tie sends half the gradient to each operand.
enum class BinaryFn {
  Add,
  Sub,
  Mul,
  Div,
  Pow,
  Eq,
  Lt,
  Le,
  Gt,
  Ge,
  And,
  Or,
  Max,
  Min
};

/// Whether Fn computes a 0/1 mask (a comparison or boolean logic): the
/// generic path's form of ONNX's bool tensors. Nothing differentiates it.
inline bool isMaskFn(BinaryFn Fn) {
  return Fn >= BinaryFn::Eq && Fn <= BinaryFn::Or;
}

struct PointwiseName {
  const char *Name;
  PointwiseFn Fn;
};

inline const PointwiseName *pointwiseNames(size_t &Count) {
  static const PointwiseName Table[] = {
      {"neg", PointwiseFn::Neg},
      {"exp", PointwiseFn::Exp},
      {"log", PointwiseFn::Log},
      {"sqrt", PointwiseFn::Sqrt},
      {"reciprocal", PointwiseFn::Reciprocal},
      {"tanh", PointwiseFn::Tanh},
      {"sigmoid", PointwiseFn::Sigmoid},
      {"relu", PointwiseFn::Relu},
      {"erf", PointwiseFn::Erf},
      {"sin", PointwiseFn::Sin},
      {"cos", PointwiseFn::Cos},
      {"abs", PointwiseFn::Abs},
      {"not", PointwiseFn::Not},
      {"isnan", PointwiseFn::IsNan},
      {"add", PointwiseFn::AddScalar},
      {"sub", PointwiseFn::SubScalar},
      {"rsub", PointwiseFn::RsubScalar},
      {"mul", PointwiseFn::MulScalar},
      {"div", PointwiseFn::DivScalar},
      {"rdiv", PointwiseFn::RdivScalar},
      {"pow", PointwiseFn::PowScalar},
      {"clamp_min", PointwiseFn::ClampMin},
      {"clamp_max", PointwiseFn::ClampMax},
  };
  Count = sizeof(Table) / sizeof(Table[0]);
  return Table;
}

inline bool isMaskFn(PointwiseFn Fn) {
  return Fn == PointwiseFn::Not || Fn == PointwiseFn::IsNan;
}

/// Whether Fn reads a scalar operand (the `scalar` attribute).
inline bool takesScalar(PointwiseFn Fn) { return Fn >= PointwiseFn::AddScalar; }

/// Returns false when Name is not a pointwise function.
inline bool parsePointwiseFn(const std::string &Name, PointwiseFn &Out) {
  size_t N;
  const PointwiseName *T = pointwiseNames(N);
  for (size_t I = 0; I < N; ++I)
    if (Name == T[I].Name) {
      Out = T[I].Fn;
      return true;
    }
  return false;
}

/// "neg, exp, ..., pow", for messages.
inline std::string pointwiseList() {
  size_t N;
  const PointwiseName *T = pointwiseNames(N);
  std::string S;
  for (size_t I = 0; I < N; ++I)
    S += (I ? ", " : "") + std::string(T[I].Name);
  return S;
}

/// The binary fns' names, in BinaryFn's order (the one table the parser
/// and --dump read).
inline const char *binaryFnName(BinaryFn Fn) {
  static const char *const Names[] = {"add", "sub", "mul", "div", "pow",
                                      "eq",  "lt",  "le",  "gt",  "ge",
                                      "and", "or",  "max", "min"};
  static_assert(sizeof(Names) / sizeof(Names[0]) == int(BinaryFn::Min) + 1,
                "a name per BinaryFn");
  return Names[int(Fn)];
}

/// "add, sub, ..., or", for messages.
inline std::string binaryList() {
  std::string S;
  for (int I = 0; I <= int(BinaryFn::Min); ++I)
    S += (I ? ", " : "") + std::string(binaryFnName(BinaryFn(I)));
  return S;
}

inline bool parseBinaryFn(const std::string &Name, BinaryFn &Out) {
  for (int I = 0; I <= int(BinaryFn::Min); ++I)
    if (Name == binaryFnName(BinaryFn(I))) {
      Out = BinaryFn(I);
      return true;
    }
  return false;
}

/// fn(x) (C: the scalar), computed in T.
template <typename T>
WEFT_HOST_DEVICE inline T pointwise(PointwiseFn Fn, T X, T C) {
  switch (Fn) {
  case PointwiseFn::Neg:
    return -X;
  case PointwiseFn::Exp:
    return std::exp(X);
  case PointwiseFn::Log:
    return std::log(X);
  case PointwiseFn::Sqrt:
    return std::sqrt(X);
  case PointwiseFn::Reciprocal:
    return T(1) / X;
  case PointwiseFn::Tanh:
    return std::tanh(X);
  case PointwiseFn::Sigmoid:
    return T(1) / (T(1) + std::exp(-X));
  case PointwiseFn::Relu:
    return X > T(0) ? X : T(0);
  case PointwiseFn::Erf:
    return std::erf(X);
  case PointwiseFn::Sin:
    return std::sin(X);
  case PointwiseFn::Cos:
    return std::cos(X);
  case PointwiseFn::Abs:
    return std::abs(X);
  case PointwiseFn::Not:
    return T(X == T(0));
  case PointwiseFn::IsNan:
    return T(std::isnan(X));
  case PointwiseFn::AddScalar:
    return X + C;
  case PointwiseFn::SubScalar:
    return X - C;
  case PointwiseFn::RsubScalar:
    return C - X;
  case PointwiseFn::MulScalar:
    return X * C;
  case PointwiseFn::DivScalar:
    return X / C;
  case PointwiseFn::RdivScalar:
    return C / X;
  case PointwiseFn::PowScalar:
    // x^2 as PyTorch computes it (a product; pow rounds the same or 1 ulp
    // apart).
    return C == T(2) ? X * X : std::pow(X, C);
  case PointwiseFn::ClampMin:
    return X < C ? C : X;
  case PointwiseFn::ClampMax:
    return X > C ? C : X;
  }
  return X;
}

/// dy * fn'(x).
template <typename T>
WEFT_HOST_DEVICE inline T pointwiseGrad(PointwiseFn Fn, T X, T C, T Dy) {
  switch (Fn) {
  case PointwiseFn::Neg:
    return -Dy;
  case PointwiseFn::Exp:
    return Dy * std::exp(X);
  case PointwiseFn::Log:
    return Dy / X;
  case PointwiseFn::Sqrt:
    return Dy / (T(2) * std::sqrt(X));
  case PointwiseFn::Reciprocal:
    return -Dy / (X * X);
  case PointwiseFn::Tanh: {
    T Y = std::tanh(X);
    return Dy * (T(1) - Y * Y);
  }
  case PointwiseFn::Sigmoid: {
    T Y = T(1) / (T(1) + std::exp(-X));
    return Dy * Y * (T(1) - Y);
  }
  case PointwiseFn::Relu:
    return X > T(0) ? Dy : T(0);
  case PointwiseFn::Erf:
    return Dy * T(1.1283791670955126) * std::exp(-X * X); // 2/sqrt(pi)
  case PointwiseFn::Sin:
    return Dy * std::cos(X);
  case PointwiseFn::Cos:
    return -Dy * std::sin(X);
  case PointwiseFn::Not:
  case PointwiseFn::IsNan:
    return T(0);         // a mask is flat wherever it is differentiable
  case PointwiseFn::Abs: // sign(x), 0 at 0 (PyTorch's)
    return X > T(0) ? Dy : X < T(0) ? -Dy : T(0);
  case PointwiseFn::AddScalar:
  case PointwiseFn::SubScalar:
    return Dy;
  case PointwiseFn::RsubScalar:
    return -Dy;
  case PointwiseFn::MulScalar:
    return Dy * C;
  case PointwiseFn::DivScalar:
    return Dy / C;
  case PointwiseFn::RdivScalar:
    return -Dy * C / (X * X);
  case PointwiseFn::PowScalar:
    // d/dx x^c = c x^(c-1); c = 0 is a constant (PyTorch: 0, also at x = 0).
    if (C == T(0))
      return T(0);
    return C == T(2) ? Dy * C * X : Dy * C * std::pow(X, C - T(1));
  case PointwiseFn::ClampMin: // torch.clamp: dy where x >= c (NaN: 0)
    return X >= C ? Dy : T(0);
  case PointwiseFn::ClampMax:
    return X <= C ? Dy : T(0);
  }
  return Dy;
}

template <typename T> WEFT_HOST_DEVICE inline T binary(BinaryFn Fn, T A, T B) {
  switch (Fn) {
  case BinaryFn::Add:
    return A + B;
  case BinaryFn::Sub:
    return A - B;
  case BinaryFn::Mul:
    return A * B;
  case BinaryFn::Div:
    return A / B;
  case BinaryFn::Pow:
    return std::pow(A, B);
  case BinaryFn::Eq:
    return T(A == B);
  case BinaryFn::Lt:
    return T(A < B);
  case BinaryFn::Le:
    return T(A <= B);
  case BinaryFn::Gt:
    return T(A > B);
  case BinaryFn::Ge:
    return T(A >= B);
  case BinaryFn::And:
    return T(A != T(0) && B != T(0));
  case BinaryFn::Or:
    return T(A != T(0) || B != T(0));
  case BinaryFn::Max:
    return std::isnan(A) || std::isnan(B) ? A + B : A > B ? A : B;
  case BinaryFn::Min:
    return std::isnan(A) || std::isnan(B) ? A + B : A < B ? A : B;
  }
  return A;
}

/// dy * d(a fn b)/d(operand), operand 0 (a) or 1 (b).
template <typename T>
WEFT_HOST_DEVICE inline T binaryGrad(BinaryFn Fn, int Operand, T A, T B, T Dy) {
  switch (Fn) {
  case BinaryFn::Add:
    return Dy;
  case BinaryFn::Sub:
    return Operand == 0 ? Dy : -Dy;
  case BinaryFn::Mul:
    return Operand == 0 ? Dy * B : Dy * A;
  case BinaryFn::Div:
    return Operand == 0 ? Dy / B : -Dy * A / (B * B);
  case BinaryFn::Pow:
    // As PyTorch's pow backward: d/da = b a^(b-1) (0 where b = 0), d/db =
    // a^b log(a) (0 where a = 0 and b >= 0, the limit it takes).
    if (Operand == 0)
      return B == T(0) ? T(0) : Dy * B * std::pow(A, B - T(1));
    return A == T(0) && B >= T(0) ? T(0) : Dy * std::pow(A, B) * std::log(A);
  case BinaryFn::Eq:
  case BinaryFn::Lt:
  case BinaryFn::Le:
  case BinaryFn::Gt:
  case BinaryFn::Ge:
  case BinaryFn::And:
  case BinaryFn::Or:
    return T(0); // a mask is flat wherever it is differentiable
  case BinaryFn::Max:
  case BinaryFn::Min: {
    // torch.maximum's backward: dy/2 to each at a tie, else dy to the one
    // picked (to both where a NaN compares neither way).
    if (A == B)
      return Dy / T(2);
    const bool Max = Fn == BinaryFn::Max;
    const bool Loses =
        Operand == 0 ? (Max ? A < B : A > B) : (Max ? A > B : A < B);
    return Loses ? T(0) : Dy;
  }
  }
  return Dy;
}

} // namespace weft

#endif // WEFT_PROGRAM_POINTWISE_H
