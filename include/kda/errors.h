// kda/errors.h — the host-side errors of kda-decode (SPEC §4: shape, dtype and stride errors
// and q outside [1, 16] are exceptions; errors in the data are flags, see Status).
//
// Every error derives from kda::Error, itself a std::invalid_argument, and names the operand,
// what was expected and what came:  "out: expected dtype bf16, got f32".  The class says what
// kind of mismatch it is, so that callers (the Python bindings: DTypeError -> TypeError,
// everything else -> ValueError) never have to read the message.
#pragma once

#include <stdexcept>
#include <string>

namespace kda {

class Error : public std::invalid_argument {
 public:
  /// "operand: expected <expected>, got <got>".
  Error(std::string operand, std::string expected, std::string got)
      : std::invalid_argument(operand + ": expected " + expected + ", got " + got),
        operand_(std::move(operand)),
        expected_(std::move(expected)),
        got_(std::move(got)) {}
  const std::string& operand() const { return operand_; }
  const std::string& expected() const { return expected_; }
  const std::string& got() const { return got_; }

 protected:
  /// A message that is not of the expected/got form (PlanError).
  Error(std::string operand, const std::string& message)
      : std::invalid_argument(message), operand_(std::move(operand)) {}

 private:
  std::string operand_, expected_, got_;
};

/// A tensor of the wrong dtype (Python: TypeError).
class DTypeError : public Error {
 public:
  using Error::Error;
};

/// A wrong rank or dimension, or rows that do not match B·q.
class ShapeError : public Error {
 public:
  using Error::Error;
};

/// Strides or data alignment the kernels cannot use.
class LayoutError : public Error {
 public:
  using Error::Error;
};

/// A tensor on another device than the layer's weights.
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// A scalar argument out of range (q, eps, lower_bound, null_slot, a name), a required
/// tensor missing, or a tensor given where the step kind does not take it.
class ArgumentError : public Error {
 public:
  using Error::Error;
};

/// A policy that cannot run its step key on this device (a forced variant or gate mode);
/// the message names the key and the reason: "policy for step (decode, B=2, q=1): ...".
class PlanError : public Error {
 public:
  PlanError(const std::string& key, const std::string& reason)
      : Error("policy for step " + key, "policy for step " + key + ": " + reason) {}
};

}  // namespace kda
