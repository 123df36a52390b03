#include "common/logging.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace horovod {

LogLevel CurrentLogLevel() {
  static const LogLevel level = [] {
    const char* v = std::getenv("HOROVOD_LOG_LEVEL");
    if (v == nullptr) return LogLevel::kWarning;
    std::string s(v);
    for (char& c : s) c = static_cast<char>(std::tolower(c));
    if (s == "trace") return LogLevel::kTrace;
    if (s == "debug") return LogLevel::kDebug;
    if (s == "info") return LogLevel::kInfo;
    if (s == "error" || s == "fatal") return LogLevel::kError;
    return LogLevel::kWarning;
  }();
  return level;
}

void LogMessage(LogLevel level, const std::string& text) {
  static const char* names[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR"};
  std::string line = std::string("[horovod ") + names[static_cast<int>(level)] +
                     "] " + text + "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace horovod
