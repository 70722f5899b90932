// prnn error tiers.
//   InvalidArgument  the caller passed something wrong (shape, dtype, null pointer, range);
//                    the message names what was expected and what was given.
//   Unsupported      a valid request this build or this GPU cannot run; reason() says why.
//   RuntimeError     a CUDA / cuBLAS / NVRTC / NCCL call failed; carries file:line and the call.
//   InternalError    a broken internal invariant (a bug in prnn), raised by PRNN_ASSERT.
// Library code never calls exit(); every failure surfaces as one of these.
#pragma once

#include <stdexcept>
#include <string>

namespace prnn {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class InvalidArgument : public Error {
 public:
  using Error::Error;
};

class Unsupported : public Error {
 public:
  Unsupported(const std::string& what, const std::string& reason)
      : Error(what + ": " + reason), reason_(reason) {}
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

class RuntimeError : public Error {
 public:
  RuntimeError(const std::string& call, const std::string& detail, const char* file, int line)
      : Error(std::string(file) + ":" + std::to_string(line) + ": " + call + " failed: " + detail),
        call_(call),
        file_(file),
        line_(line) {}
  const std::string& call() const noexcept { return call_; }
  const std::string& file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  std::string call_;
  std::string file_;
  int line_;
};

class InternalError : public Error {
 public:
  using Error::Error;
};

}  // namespace prnn
