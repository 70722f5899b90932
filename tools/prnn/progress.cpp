#include "progress.h"

#include <unistd.h>

#include <algorithm>

namespace prnn::cli {

namespace {
constexpr int kBarWidth = 30;
}

ProgressBar::ProgressBar(std::int64_t total, std::FILE* out)
    : total_(std::max<std::int64_t>(total, 1)), out_(out), tty_(isatty(fileno(out)) != 0) {}

void ProgressBar::update(std::int64_t done, const std::string& status) {
  const double frac = std::clamp(double(done) / double(total_), 0.0, 1.0);
  const int filled = static_cast<int>(frac * kBarWidth);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kBarWidth, '.');
  const std::int64_t decile = static_cast<std::int64_t>(frac * 10);
  if (tty_) {
    std::fprintf(out_, "\r[%s] %3d%%  %s\033[K", bar.c_str(), static_cast<int>(frac * 100),
                 status.c_str());
    std::fflush(out_);
  } else if (decile != last_printed_decile_) {
    last_printed_decile_ = decile;
    std::fprintf(out_, "[%s] %3d%%  %s\n", bar.c_str(), static_cast<int>(frac * 100),
                 status.c_str());
  }
}

void ProgressBar::finish() {
  if (tty_) std::fprintf(out_, "\n");
  std::fflush(out_);
}

}  // namespace prnn::cli
