/*
 * pprof profile builder with bounded memory.
 *
 * A builder accumulates samples for one profiling period and serialises them
 * as a gzip-compressed pprof profile (perftools.profiles.Profile, see
 * profile.proto), the format read by `go tool pprof` and most continuous
 * profiling back ends.
 *
 * Model (pprof terms):
 *  - sample type: a {type, unit} pair such as {"cpu", "nanoseconds"}. The
 *    builder is created with a fixed list of sample types; every sample
 *    carries exactly one value per sample type (a sample recorded for one
 *    type has zeros for the others).
 *  - function: one per distinct frame name, stored as the function's name
 *    (system_name, filename and start_line are left empty/0; pprof would
 *    otherwise treat the name as a C++ symbol and strip "<...>" generic
 *    arguments from it).
 *  - location: exactly one per function, address 0, no mapping, one line
 *    (line number 0) referring to that function. Location id == function id.
 *  - sample: a stack of locations (leaf first), its values and its labels.
 *    Samples with identical stacks and identical label sets are aggregated:
 *    their values are summed (saturating at INT64_MIN/INT64_MAX).
 *  - label: a string label ({"thread name", "worker-1"}) or a numeric label
 *    ({"thread id", 1234}, optionally with a unit such as "bytes").
 *
 * All ids in the produced profile are nonzero and unique; string_table[0] is
 * "".
 *
 * Bounded memory: every table has a limit (clrmux_pprof_limits). When adding
 * a sample would exceed a limit, the sample is dropped as a whole (nothing of
 * it is kept), the drop is counted per reason, and the serialised profile
 * gets one comment per non-zero reason, e.g.
 * "dropped 12 samples: buffer full". Stacks deeper than max_stack_depth are
 * truncated, not dropped (see clrmux_pprof_limits.max_stack_depth).
 * Worst-case memory is roughly
 *   max_samples * (48 + 8 * n_sample_types + 8 * max_stack_depth
 *                  + 32 * CLRMUX_PPROF_MAX_LABELS)
 *   + max_functions * 16 + max_strings * 24 + max_string_bytes,
 * plus, transiently while serialising, about the same again for the
 * protobuf-c message tree and the encoded and compressed output.
 *
 * Threading: a builder is NOT thread-safe. The caller serialises all calls
 * on one builder (functions taking a const builder may run concurrently
 * with each other, but not with any mutating call). There is no global
 * mutable state, so distinct builders may be used from distinct threads.
 *
 * Errors: functions returning int return 0 on success or a negative errno
 * value (-EINVAL bad arguments, -ENOMEM allocation failure, -ENOSPC a limit
 * was hit, -EIO/-errno of the failing system call for file output).
 *
 * Strings: all strings passed in are NUL-terminated, expected to be UTF-8
 * (pprof strings are UTF-8; see framename.h to produce them), and are
 * copied: the caller keeps ownership and may free them after the call.
 */
#ifndef CLRMUX_PROFILER_PPROF_H
#define CLRMUX_PROFILER_PPROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum number of labels on one sample (more is -EINVAL). */
#define CLRMUX_PPROF_MAX_LABELS 16
/* Maximum number of caller comments on one profile (more is -ENOSPC). */
#define CLRMUX_PPROF_MAX_COMMENTS 32
/* Upper bound accepted for every count limit (ids are kept in 32 bits). */
#define CLRMUX_PPROF_LIMIT_MAX ((size_t)1 << 28)
/* Frame name used for a NULL or empty frame name. */
#define CLRMUX_PPROF_UNKNOWN_FRAME "[unknown]"
/* Root frame that replaces the frames cut off from a too-deep stack. */
#define CLRMUX_PPROF_TRUNCATED_FRAME "[truncated]"

/* A sample type or period type: e.g. {"cpu", "nanoseconds"},
 * {"alloc-size", "bytes"}, {"exception", "count"}. Both strings are
 * required, non-empty, and copied by the builder. */
typedef struct clrmux_pprof_value_type {
    const char *type;
    const char *unit;
} clrmux_pprof_value_type;

/* Memory limits of a builder. A field set to 0 selects the default given
 * in brackets; a field above CLRMUX_PPROF_LIMIT_MAX is -EINVAL. */
typedef struct clrmux_pprof_limits {
    /* Distinct (aggregated) samples per period [65536]. Adding to an
     * existing sample never hits this limit. */
    size_t max_samples;
    /* Distinct frame names, i.e. functions (= locations) [65536]. */
    size_t max_functions;
    /* Entries of the string table, including "" and the sample type,
     * period type, label and comment strings [131072]. */
    size_t max_strings;
    /* Total bytes of the string table, NULs included [16 MiB]. */
    size_t max_string_bytes;
    /* Frames kept per sample [512]. A deeper stack keeps its
     * max_stack_depth - 1 leaf-most frames and gets
     * CLRMUX_PPROF_TRUNCATED_FRAME as its root; such stacks are counted
     * (clrmux_pprof_truncated_stacks) and reported in a comment. */
    size_t max_stack_depth;
} clrmux_pprof_limits;

/* Builder configuration, read by clrmux_pprof_create only. */
typedef struct clrmux_pprof_config {
    /* 1..64 sample types, with distinct type names. */
    const clrmux_pprof_value_type *sample_types;
    size_t n_sample_types;
    /* Period type and period (events between samples, in period_type
     * units, >= 0), e.g. {"cpu", "nanoseconds"} and 10000000 for 100 Hz.
     * period_type.type == NULL omits the period type. */
    clrmux_pprof_value_type period_type;
    int64_t period;
    /* Type name of the sample type pprof shows by default; must be one of
     * sample_types[].type. NULL leaves it unset (pprof then uses the last
     * sample type). */
    const char *default_sample_type;
    clrmux_pprof_limits limits;
} clrmux_pprof_config;

/* A sample label. key is required and non-empty. If str is non-NULL and
 * non-empty, this is a string label and num/num_unit are ignored;
 * otherwise it is a numeric label with value num and optional unit
 * num_unit (NULL or "" for none). Keys must be distinct within a sample. */
typedef struct clrmux_pprof_label {
    const char *key;
    const char *str;
    int64_t num;
    const char *num_unit;
} clrmux_pprof_label;

/* Why a sample was dropped. */
typedef enum clrmux_pprof_drop_reason {
    CLRMUX_PPROF_DROP_SAMPLES = 0,  /* max_samples reached ("buffer full") */
    CLRMUX_PPROF_DROP_FUNCTIONS,    /* max_functions reached */
    CLRMUX_PPROF_DROP_STRINGS,      /* max_strings or max_string_bytes */
    CLRMUX_PPROF_DROP_NOMEM,        /* allocation failure */
    CLRMUX_PPROF_DROP_REASON_COUNT
} clrmux_pprof_drop_reason;

/* Opaque builder. */
typedef struct clrmux_pprof_builder clrmux_pprof_builder;

/* Creates a builder from cfg (copied; cfg and its strings may be freed
 * afterwards). On success stores the builder in *out and returns 0; the
 * caller owns it and releases it with clrmux_pprof_destroy. Errors:
 * -EINVAL (NULL argument, no or too many sample types, empty or duplicate
 * type names, negative period, unknown default_sample_type, limit too
 * large or max_strings too small to hold the configuration strings),
 * -ENOMEM. *out is left untouched on error. */
int clrmux_pprof_create(const clrmux_pprof_config *cfg,
                        clrmux_pprof_builder **out);

/* Frees the builder and everything it owns. NULL is a no-op. */
void clrmux_pprof_destroy(clrmux_pprof_builder *b);

/* Adds one sample.
 *  frames/n_frames: the stack, frames[0] is the leaf (innermost) frame,
 *    frames[n_frames - 1] the root. n_frames may be 0 (empty stack);
 *    frames may be NULL only then. A NULL or "" entry is recorded as
 *    CLRMUX_PPROF_UNKNOWN_FRAME.
 *  values/n_values: exactly one value per sample type, in the order of
 *    clrmux_pprof_config.sample_types (n_values must equal
 *    n_sample_types), in each sample type's unit.
 *  labels/n_labels: 0..CLRMUX_PPROF_MAX_LABELS labels, any order (the
 *    label set is canonicalised, so order does not affect aggregation).
 * A sample with the same stack and label set as an existing one is merged
 * into it (values summed). Returns 0 when recorded; -EINVAL for invalid
 * arguments (not counted as a drop); -ENOSPC when a limit was hit or
 * -ENOMEM on allocation failure, in both cases the sample is dropped and
 * counted, and the builder is unchanged otherwise. */
int clrmux_pprof_add_sample(clrmux_pprof_builder *b,
                            const char *const *frames, size_t n_frames,
                            const int64_t *values, size_t n_values,
                            const clrmux_pprof_label *labels,
                            size_t n_labels);

/* Sets the profile's start time (nanoseconds since the Unix epoch, UTC)
 * and duration (nanoseconds). Both default to 0 and are cleared by
 * clrmux_pprof_reset. */
void clrmux_pprof_set_time(clrmux_pprof_builder *b, int64_t time_nanos,
                           int64_t duration_nanos);

/* Adds a free-form comment (copied) to the profile. Returns 0, -EINVAL
 * (NULL b or comment), -ENOSPC (CLRMUX_PPROF_MAX_COMMENTS reached or
 * string limits), -ENOMEM. Comments about drops and truncation are added
 * automatically at serialisation and need not be added here. */
int clrmux_pprof_add_comment(clrmux_pprof_builder *b, const char *comment);

/* Number of samples dropped since creation or the last reset for the given
 * reason; CLRMUX_PPROF_DROP_REASON_COUNT (or any out-of-range value)
 * returns the total over all reasons. */
uint64_t clrmux_pprof_dropped(const clrmux_pprof_builder *b,
                              clrmux_pprof_drop_reason reason);

/* Number of samples whose stack was truncated to max_stack_depth since
 * creation or the last reset. */
uint64_t clrmux_pprof_truncated_stacks(const clrmux_pprof_builder *b);

/* Number of distinct samples, functions (== locations) and strings
 * currently held (strings include "" and configuration strings). */
size_t clrmux_pprof_sample_count(const clrmux_pprof_builder *b);
size_t clrmux_pprof_function_count(const clrmux_pprof_builder *b);
size_t clrmux_pprof_string_count(const clrmux_pprof_builder *b);

/* Serialises the current profile: protobuf encoding, then gzip
 * compression (RFC 1952 wrapper). On success stores a malloc'd buffer in
 * *out and its length in *out_len and returns 0; the caller frees *out
 * with free(). The builder is not modified (call clrmux_pprof_reset to
 * start the next period). Drop and truncation counts are written as
 * comments ("dropped N samples: buffer full", ...). Errors: -EINVAL,
 * -ENOMEM, -EIO (compression failure); *out and *out_len are untouched on
 * error. */
int clrmux_pprof_serialize(const clrmux_pprof_builder *b, uint8_t **out,
                           size_t *out_len);

/* Serialises like clrmux_pprof_serialize and writes the result atomically
 * to path: the data goes to a temporary file in the same directory
 * ("<path>.tmp.<pid>"), which is fsync'd and then renamed over path, so
 * readers see either the old file or the complete new one (the temporary
 * name is per process: do not write the same path from two builders of one
 * process at the same time). The file mode is 0644 (before umask). Returns 0 or a negative errno (-EINVAL, -ENOMEM,
 * -EIO, or the error of open/write/fsync/rename); the temporary file is
 * removed on error. */
int clrmux_pprof_write_file(const clrmux_pprof_builder *b, const char *path);

/* Flags of clrmux_pprof_write_file_flags. */
enum {
    /* Do not wait for the disk: the temporary file is not fsync'd before the rename, and
     * its writeback is left to the kernel (as for any file written: within
     * dirty_expire_centisecs, 30 s by default). Readers still see the old file or the
     * complete new one; after a machine crash (power loss, kernel panic) within the
     * writeback delay the file may be empty. For a process's last file, written on its
     * exit path, where fsync cost 1.3-2.5 ms of wall time on this project's VM (a hello
     * world runs in ~80 ms) and starting the writeback (sync_file_range) 0.1-0.25 ms. */
    CLRMUX_PPROF_WRITE_NO_FSYNC = 1,
};

/* clrmux_pprof_write_file with flags (CLRMUX_PPROF_WRITE_*); flags 0 is
 * clrmux_pprof_write_file. Same returns. */
int clrmux_pprof_write_file_flags(const clrmux_pprof_builder *b, const char *path, unsigned flags);

/* Clears samples, functions, locations, strings other than the
 * configuration strings, comments, drop and truncation counts, time and
 * duration, ready for the next period. Allocated capacity is kept (it is
 * bounded by the limits). The configuration is unchanged. */
void clrmux_pprof_reset(clrmux_pprof_builder *b);

#ifdef __cplusplus
}
#endif

#endif /* CLRMUX_PROFILER_PPROF_H */
