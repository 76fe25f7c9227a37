//===- Activation.h - transformers' ACT2FN activations ----------*- C++ -*-===//
//
// The activations a config's hidden_act / activation_function may name, as
// Hugging Face transformers' ACT2FN computes them, with their derivatives
// (the gradient torch's autograd computes, including its choice at kinks:
// relu'(0) = 0). Header only and dependency free: the config reader, the
// dialect's verifier, the program loader and the CPU kernels share it.
// gelu_new and gelu_pytorch_tanh are weft.gelu (the fused tanh GELU);
// silu / swish in a Llama MLP is weft.swiglu.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_ACTIVATION_H
#define WEFT_RUNTIME_ACTIVATION_H

#include <cmath>
#include <string>

// The formulas below run on the host and, compiled by nvcc, in the CUDA
// kernels (runtime/cuda/kernels): one definition of each activation.
#ifdef __CUDACC__
#define WEFT_HOST_DEVICE __host__ __device__
#else
#define WEFT_HOST_DEVICE
#endif

namespace weft {

enum class Activation {
  Gelu,      // "gelu", "gelu_python": x * Phi(x), the exact (erf) GELU
  GeluTanh,  // "gelu_new", "gelu_pytorch_tanh", "gelu_accurate"
  GeluFast,  // "gelu_fast": the tanh form with 0.7978845608 (10 digits)
  QuickGelu, // "quick_gelu": x * sigmoid(1.702 x)
  Relu,      // "relu"
  Relu2,     // "relu2": relu(x)^2
  Relu6,     // "relu6": clamp(x, 0, 6)
  LeakyRelu, // "leaky_relu": slope 0.01 below 0 (nn.LeakyReLU's default)
  Silu,      // "silu", "swish"
  Sigmoid,   // "sigmoid"
  Tanh,      // "tanh"
  Linear,    // "linear": identity
  Laplace,   // "laplace": 0.5 * (1 + erf((x - 0.707107) / (0.282095 sqrt 2)))
  Mish,      // "mish": x * tanh(log1p(exp(x)))
};

struct ActivationName {
  const char *Name;
  Activation Kind;
};

inline const ActivationName *activationNames(size_t &Count) {
  static const ActivationName Table[] = {
      {"gelu", Activation::Gelu},
      {"gelu_python", Activation::Gelu},
      {"gelu_new", Activation::GeluTanh},
      {"gelu_pytorch_tanh", Activation::GeluTanh},
      {"gelu_accurate", Activation::GeluTanh},
      {"gelu_fast", Activation::GeluFast},
      {"quick_gelu", Activation::QuickGelu},
      {"relu", Activation::Relu},
      {"relu2", Activation::Relu2},
      {"relu6", Activation::Relu6},
      {"leaky_relu", Activation::LeakyRelu},
      {"silu", Activation::Silu},
      {"swish", Activation::Silu},
      {"sigmoid", Activation::Sigmoid},
      {"tanh", Activation::Tanh},
      {"linear", Activation::Linear},
      {"laplace", Activation::Laplace},
      {"mish", Activation::Mish},
  };
  Count = sizeof(Table) / sizeof(Table[0]);
  return Table;
}

/// Returns false when Name is not an activation weft implements.
inline bool parseActivation(const std::string &Name, Activation &Out) {
  size_t N;
  const ActivationName *T = activationNames(N);
  for (size_t I = 0; I < N; ++I)
    if (Name == T[I].Name) {
      Out = T[I].Kind;
      return true;
    }
  return false;
}

/// "gelu, gelu_new, ..." for messages.
inline std::string activationList() {
  size_t N;
  const ActivationName *T = activationNames(N);
  std::string S;
  for (size_t I = 0; I < N; ++I)
    S += (I ? ", " : "") + std::string(T[I].Name);
  return S;
}

/// f(x) in double precision.
WEFT_HOST_DEVICE inline double activate(Activation K, double X) {
  auto Sigmoid = [](double V) { return 1.0 / (1.0 + std::exp(-V)); };
  const double C = 0.7978845608028654, A = 0.044715;
  switch (K) {
  case Activation::Gelu:
    return 0.5 * X * (1.0 + std::erf(X * M_SQRT1_2));
  case Activation::GeluTanh:
    return 0.5 * X * (1.0 + std::tanh(C * (X + A * X * X * X)));
  case Activation::GeluFast:
    return 0.5 * X * (1.0 + std::tanh(X * 0.7978845608 * (1.0 + A * X * X)));
  case Activation::QuickGelu:
    return X * Sigmoid(1.702 * X);
  case Activation::Relu:
    return X > 0 ? X : 0.0;
  case Activation::Relu2:
    return X > 0 ? X * X : 0.0;
  case Activation::Relu6:
    return X <= 0 ? 0.0 : X >= 6 ? 6.0 : X;
  case Activation::LeakyRelu:
    return X > 0 ? X : 0.01 * X;
  case Activation::Silu:
    return X * Sigmoid(X);
  case Activation::Sigmoid:
    return Sigmoid(X);
  case Activation::Tanh:
    return std::tanh(X);
  case Activation::Linear:
    return X;
  case Activation::Laplace:
    return 0.5 * (1.0 + std::erf((X - 0.707107) / (0.282095 * M_SQRT2)));
  case Activation::Mish:
    return X * std::tanh(std::log1p(std::exp(X)));
  }
  return X;
}

/// f'(x) in double precision (torch's subgradients at kinks).
WEFT_HOST_DEVICE inline double activateGrad(Activation K, double X) {
  auto Sigmoid = [](double V) { return 1.0 / (1.0 + std::exp(-V)); };
  const double C = 0.7978845608028654, A = 0.044715;
  switch (K) {
  case Activation::Gelu:
    return 0.5 * (1.0 + std::erf(X * M_SQRT1_2)) +
           X * std::exp(-0.5 * X * X) * 0.3989422804014327;
  case Activation::GeluTanh: {
    double T = std::tanh(C * (X + A * X * X * X));
    return 0.5 * (1.0 + T) +
           0.5 * X * (1.0 - T * T) * C * (1.0 + 3 * A * X * X);
  }
  case Activation::GeluFast: {
    const double F = 0.7978845608;
    double T = std::tanh(X * F * (1.0 + A * X * X));
    return 0.5 * (1.0 + T) +
           0.5 * X * (1.0 - T * T) * F * (1.0 + 3 * A * X * X);
  }
  case Activation::QuickGelu: {
    double S = Sigmoid(1.702 * X);
    return S + 1.702 * X * S * (1.0 - S);
  }
  case Activation::Relu:
    return X > 0 ? 1.0 : 0.0;
  case Activation::Relu2:
    return X > 0 ? 2.0 * X : 0.0;
  case Activation::Relu6:
    return X > 0 && X < 6 ? 1.0 : 0.0;
  case Activation::LeakyRelu:
    return X > 0 ? 1.0 : 0.01;
  case Activation::Silu: {
    double S = Sigmoid(X);
    return S * (1.0 + X * (1.0 - S));
  }
  case Activation::Sigmoid: {
    double S = Sigmoid(X);
    return S * (1.0 - S);
  }
  case Activation::Tanh: {
    double T = std::tanh(X);
    return 1.0 - T * T;
  }
  case Activation::Linear:
    return 1.0;
  case Activation::Laplace: {
    double Z = (X - 0.707107) / 0.282095;
    return std::exp(-0.5 * Z * Z) * 0.3989422804014327 / 0.282095;
  }
  case Activation::Mish: {
    double T = std::tanh(std::log1p(std::exp(X)));
    return T + X * Sigmoid(X) * (1.0 - T * T);
  }
  }
  return 1.0;
}

} // namespace weft

#endif // WEFT_RUNTIME_ACTIVATION_H
