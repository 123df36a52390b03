// Minimal leveled logging to stderr. The level comes from HOROVOD_LOG_LEVEL
// (trace, debug, info, warning, error; default warning) and is read once.
// Thread-safe: each message is written with one write(2).
#ifndef HOROVOD_COMMON_LOGGING_H_
#define HOROVOD_COMMON_LOGGING_H_

#include <sstream>
#include <string>

namespace horovod {

enum class LogLevel { kTrace = 0, kDebug, kInfo, kWarning, kError };

LogLevel CurrentLogLevel();
void LogMessage(LogLevel level, const std::string& text);

}  // namespace horovod

#define HVD_LOG(level, expr)                                            \
  do {                                                                  \
    if (::horovod::LogLevel::level >= ::horovod::CurrentLogLevel()) {   \
      std::ostringstream _hvd_os;                                       \
      _hvd_os << expr;                                                  \
      ::horovod::LogMessage(::horovod::LogLevel::level, _hvd_os.str()); \
    }                                                                   \
  } while (0)

#endif  // HOROVOD_COMMON_LOGGING_H_
