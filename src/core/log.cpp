#include "prnn/log.h"

#include <cstdio>
#include <mutex>

namespace prnn {
namespace {

struct LoggerState {
  std::mutex mutex;
  LogLevel level = LogLevel::Warn;
  LogSink sink;
};

LoggerState& state() {
  static LoggerState s;
  return s;
}

}  // namespace

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    case LogLevel::Off: return "off";
  }
  return "?";
}

void set_log_level(LogLevel level) {
  std::lock_guard lock(state().mutex);
  state().level = level;
}

LogLevel log_level() {
  std::lock_guard lock(state().mutex);
  return state().level;
}

void set_log_sink(LogSink sink) {
  std::lock_guard lock(state().mutex);
  state().sink = std::move(sink);
}

void log(LogLevel level, const std::string& message) {
  LogSink sink;
  {
    std::lock_guard lock(state().mutex);
    if (level < state().level || level == LogLevel::Off) return;
    sink = state().sink;
  }
  if (sink) {
    sink(level, message);
  } else {
    std::fprintf(stderr, "prnn %s: %s\n", to_string(level), message.c_str());
  }
}

}  // namespace prnn
