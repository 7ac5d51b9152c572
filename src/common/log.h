/* Logging for clrmux: one line per event, to a file or stderr, never blocking for long.
 *
 * Line format: "clrmux[<pid>] <UTC time> <LEVEL> <message>\n". Thread-safe: each line is
 * written with one write(2) call. Before clrmux_log_open() lines go to stderr. */
#ifndef CLRMUX_LOG_H
#define CLRMUX_LOG_H

#include <stdarg.h>
#include <stddef.h>

enum clrmux_log_level {
    CLRMUX_LOG_ERROR = 0,
    CLRMUX_LOG_WARN = 1,
    CLRMUX_LOG_INFO = 2,
    CLRMUX_LOG_DEBUG = 3,
    CLRMUX_LOG_TRACE = 4,
};

/* Parses "error|warn|info|debug|trace" (case-insensitive). Returns the level, or -1. */
int clrmux_log_level_parse(const char *s);
/* The upper-case name of a level ("ERROR"...). */
const char *clrmux_log_level_name(int level);

/* Sets the threshold: messages above it are dropped. Default CLRMUX_LOG_INFO. */
void clrmux_log_set_level(int level);
int clrmux_log_get_level(void);

/* Directs log lines to `path_template` (appended to, created 0640), where "%p" expands to
 * the process id and "%%" to "%"; NULL or "" means stderr. The file is opened without
 * following a symlink in its last component (O_NOFOLLOW), without blocking, and must be a
 * regular file with one link or a character device (/dev/null). Returns 0, or -1 (errno set: ELOOP for a symlink, EINVAL
 * for a FIFO/device/folder, EMLINK for a hard-linked file) when it cannot be used, in
 * which case logging stays where it was. */
int clrmux_log_open(const char *path_template);

/* The file log lines go to (as given to clrmux_log_open, "%p" expanded) into out[outsz], or
 * "" when they go to stderr. */
void clrmux_log_path(char *out, size_t outsz);

/* Expands "%p" (pid) and "%%" in `tmpl` into `out` (size `outsz`, always NUL-terminated).
 * Returns 0, or -1 when the result does not fit. */
int clrmux_expand_pid(const char *tmpl, char *out, unsigned long outsz);

/* Writes "clrmux[<pid>] <UTC time> <LEVEL> <msg>\n" with one write(2), formatting nothing
 * with stdio: async-signal-safe (for signal handlers). No sink, no level check. */
void clrmux_log_signal_safe(int level, const char *msg);

#if defined(__MINGW32__)
#define CLRMUX_PRINTF_FORMAT gnu_printf /* mingw-w64 with __USE_MINGW_ANSI_STDIO: C99 printf (%zu) */
#else
#define CLRMUX_PRINTF_FORMAT printf
#endif
void clrmux_log(int level, const char *fmt, ...) __attribute__((format(CLRMUX_PRINTF_FORMAT, 2, 3)));
void clrmux_vlog(int level, const char *fmt, va_list ap);

/* Routes every line also to `sink` (tests capture log lines this way); NULL removes it. */
typedef void (*clrmux_log_sink)(int level, const char *line, void *ctx);
void clrmux_log_set_sink(clrmux_log_sink sink, void *ctx);

/* In a companion library (libclrmux_profiler.so, built -DCLRMUX_PROFILER_COMPANION), log.c is
 * not linked: log_forward.c provides clrmux_log, clrmux_vlog, clrmux_log_get_level and
 * clrmux_log_level_name, and forwards every line to the host library's logger, given once at
 * start with clrmux_log_forward_to (the two functions are the host's own clrmux_vlog and
 * clrmux_log_get_level, copied; NULL members, or no call, give lines at INFO and above on
 * stderr). So the companion's lines land in clrmux's one log, at clrmux's level. */
void clrmux_log_forward_to(void (*vlog)(int level, const char *fmt, va_list ap), int (*get_level)(void));

#define LOG_ERROR(...) clrmux_log(CLRMUX_LOG_ERROR, __VA_ARGS__)
#define LOG_WARN(...) clrmux_log(CLRMUX_LOG_WARN, __VA_ARGS__)
#define LOG_INFO(...) clrmux_log(CLRMUX_LOG_INFO, __VA_ARGS__)
#define LOG_DEBUG(...) \
    do { if (clrmux_log_get_level() >= CLRMUX_LOG_DEBUG) clrmux_log(CLRMUX_LOG_DEBUG, __VA_ARGS__); } while (0)
#define LOG_TRACE(...) \
    do { if (clrmux_log_get_level() >= CLRMUX_LOG_TRACE) clrmux_log(CLRMUX_LOG_TRACE, __VA_ARGS__); } while (0)

#endif
