//===- Status.h - Error values for the runtime library ----------*- C++ -*-===//
//
// The runtime reports every failure as a value: no exceptions cross its API.
// Messages follow LLVM style: lower case, naming the value, the index, and
// expected versus actual.
//
//===----------------------------------------------------------------------===//
#ifndef WEFT_RUNTIME_STATUS_H
#define WEFT_RUNTIME_STATUS_H

#include <optional>
#include <string>
#include <utility>

namespace weft {

/// Success, or failure with a message.
class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string Message) {
    Status S;
    S.Failed = true;
    S.Msg = std::move(Message);
    return S;
  }
  bool ok() const { return !Failed; }
  const std::string &message() const { return Msg; }
  /// Prefixes context ("loading X: ") to a failure; success stays success.
  Status withContext(const std::string &Context) const {
    return ok() ? *this : error(Context + ": " + Msg);
  }

private:
  bool Failed = false;
  std::string Msg;
};

/// A value of type T, or a failure Status.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T Value) : Value(std::move(Value)) {}
  Expected(Status Error) : Err(std::move(Error)) {}
  bool ok() const { return Value.has_value(); }
  const Status &status() const { return Err; }
  const std::string &message() const { return Err.message(); }
  T &operator*() { return *Value; }
  const T &operator*() const { return *Value; }
  T *operator->() { return &*Value; }
  const T *operator->() const { return &*Value; }
  T take() { return std::move(*Value); }

private:
  std::optional<T> Value;
  Status Err;
};

} // namespace weft

#define WEFT_RETURN_IF_ERROR(Expr)                                             \
  do {                                                                         \
    ::weft::Status WeftStatus_ = (Expr);                                       \
    if (!WeftStatus_.ok())                                                     \
      return WeftStatus_;                                                      \
  } while (false)

#endif // WEFT_RUNTIME_STATUS_H
