// The one logger of the library. Library code never prints except through it.
// The default sink writes Warn and above to stderr; tests install a sink that fails on warnings.
#pragma once

#include <functional>
#include <string>

namespace prnn {

enum class LogLevel { Debug, Info, Warn, Error, Off };

using LogSink = std::function<void(LogLevel, const std::string&)>;

void set_log_level(LogLevel level);
LogLevel log_level();
// Replaces the sink; an empty function restores the default.
void set_log_sink(LogSink sink);
void log(LogLevel level, const std::string& message);
const char* to_string(LogLevel level);

}  // namespace prnn
