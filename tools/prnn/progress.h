// A one-line progress bar: redrawn in place on a terminal, printed every ~10% otherwise.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace prnn::cli {

class ProgressBar {
 public:
  ProgressBar(std::int64_t total, std::FILE* out = stdout);
  // `status` is shown after the bar, e.g. "loss 0.41  acc 0.88  12.3k tok/s".
  void update(std::int64_t done, const std::string& status);
  void finish();

 private:
  std::int64_t total_;
  std::FILE* out_;
  bool tty_;
  std::int64_t last_printed_decile_ = -1;
};

}  // namespace prnn::cli
