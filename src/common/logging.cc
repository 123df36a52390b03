#include "common/logging.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

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

namespace {

bool LogTimes() {
  static const bool show = [] {
    const char* v = std::getenv("HOROVOD_LOG_HIDE_TIME");
    return v == nullptr || std::atoi(v) == 0;
  }();
  return show;
}

// "2026-11-24 12:00:00.123456: " in local time, as a reader of several
// hosts' logs lines them up.
std::string TimePrefix() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm parts;
  localtime_r(&tv.tv_sec, &parts);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &parts);
  std::snprintf(buf + n, sizeof buf - n,
                ".%06ld: ", static_cast<long>(tv.tv_usec));
  return buf;
}

}  // namespace

void LogMessage(LogLevel level, const std::string& text) {
  static const char* names[] = {"TRACE", "DEBUG", "INFO", "WARNING", "ERROR"};
  std::string line = std::string("[") + (LogTimes() ? TimePrefix() : "") +
                     "horovod " + names[static_cast<int>(level)] + "] " + text +
                     "\n";
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
}

}  // namespace horovod
