/* loader.conf: the INI file (parsed with inih) that lists clrmux's children.
 *
 *   [loader]                  log_level, log_file, include_processes, exclude_processes,
 *                             allow_insecure_paths, enable_control, perf_map
 *   [child NAME]              path + clsid (a profiler library), or builtin = tracer|profiler;
 *                             enabled; any other key of a builtin child is passed to it.
 *
 * Parsing never fails as a whole: every problem becomes a diagnostic with its line number
 * and only the key or child concerned is dropped. loader.conf.example documents each key. */
#ifndef CLRMUX_CONFIG_H
#define CLRMUX_CONFIG_H

#include <limits.h>
#include <stddef.h>

#include "clrmux/com.h"

#define CLRMUX_MAX_CHILDREN 64
#define CLRMUX_NAME_MAX 64
#define CLRMUX_MAX_DIAGS 128
/* Bounds that keep any file's cost small: larger files are refused unread; keys beyond
 * these counts are dropped with one diagnostic. */
#define CLRMUX_CONFIG_MAX_BYTES (4u << 20)
#define CLRMUX_MAX_CHILD_KEYS 1024 /* other keys (trace = ...) kept per builtin child */
#define CLRMUX_MAX_KEYS 4096       /* the same, for the whole file */

/* One `key = value` of a builtin child's section, kept for the builtin to read. */
struct clrmux_kv {
    char *key;   /* owned, NUL-terminated */
    char *value; /* owned, NUL-terminated */
    int line;    /* 1-based line in the file */
};

/* One [child NAME] section after validation. */
struct clrmux_child_conf {
    char name[CLRMUX_NAME_MAX];
    int line;              /* line of the section header */
    char path[PATH_MAX];   /* absolute, or resolved against the config's folder; "" for builtins */
    char builtin[32];      /* "" for library children */
    CLSID clsid;           /* library children only */
    int has_clsid;
    int enabled;           /* 1 unless `enabled = false` */
    int invalid;           /* 1: a fatal problem was logged; the child is skipped */
    size_t keys_dropped;   /* other keys beyond CLRMUX_MAX_CHILD_KEYS / CLRMUX_MAX_KEYS */
    struct clrmux_kv *kvs; /* builtin children's other keys, in file order (owned) */
    size_t nkvs;
};

/* A problem found while parsing: `line` is 0 for file-level problems. */
struct clrmux_diag {
    int level; /* CLRMUX_LOG_* */
    int line;
    char msg[320];
};

struct clrmux_config {
    char path[PATH_MAX]; /* the file read */
    char dir[PATH_MAX];  /* its folder: relative child paths resolve from here */
    int found;           /* the file existed and was readable */
    int log_level;       /* -1 = not set */
    char log_file[PATH_MAX];
    int has_log_file;
    char include_processes[1024]; /* ';'- or ','-separated names; "" = every process */
    char exclude_processes[1024];
    int allow_insecure_paths; /* [loader] allow_insecure_paths = true: see common/trust.h */
    int control_disabled;     /* [loader] enable_control = false: no control channel (src/control) */
    int perf_map;             /* [loader] perf_map = true: the runtime writes /tmp/perf-PID.map */
    size_t nkvs_total;        /* builtin children's other keys kept, file-wide */
    size_t nchildren; /* every [child] section, valid or not, in file order */
    size_t ndiags;
    size_t dropped_diags;
    /* Last, and not cleared when loading starts (~320 KB, most of the structure): an entry is
     * cleared or written whole when it is taken; only children[0..nchildren) and
     * diags[0..ndiags) hold anything. */
    struct clrmux_child_conf children[CLRMUX_MAX_CHILDREN];
    struct clrmux_diag diags[CLRMUX_MAX_DIAGS];
};

/* Reads and validates `path`. Always fills *cfg (its fields cleared first, the children[]
 * and diags[] entries as they are taken); a missing file gives
 * found = 0 and one diagnostic. Only a regular file of at most CLRMUX_CONFIG_MAX_BYTES is
 * read (a FIFO, device or folder is refused without blocking), and only one that
 * clrmux_path_trusted accepts, unless the file itself sets allow_insecure_paths = true
 * (then a warning); a refused file gives found = 0, no children and one diagnostic saying
 * why. Release with clrmux_config_free. */
void clrmux_config_load(const char *path, struct clrmux_config *cfg);
/* Same, from text in memory (`name` is used in messages and `dir` for relative paths). */
void clrmux_config_load_string(const char *text, const char *name, const char *dir,
                               struct clrmux_config *cfg);
void clrmux_config_free(struct clrmux_config *cfg);

/* Number of children that are valid and enabled. */
size_t clrmux_config_active_children(const struct clrmux_config *cfg);

/* Whether a process named `exe` (and `app`, the app run by the dotnet host, or "") is
 * profiled under cfg's include/exclude lists. Sets *why to a static explanation. */
int clrmux_config_process_allowed(const struct clrmux_config *cfg, const char *exe,
                                  const char *app, const char **why);

/* Parses a boolean value: true/false, yes/no, on/off, 1/0 (case-insensitive). Returns 0/1,
 * or -1 when `s` is none of these. */
int clrmux_parse_bool(const char *s);

#endif
