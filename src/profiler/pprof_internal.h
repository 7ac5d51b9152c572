/* Internal to the pprof builder (src/profiler/pprof.c, pprof_write.c), not part of its
 * contract (pprof.h): the limits, the interning and sample tables, and the builder's
 * layout that the serialisation reads (see pprof.c's top comment for how the tables work). */
#ifndef CLRMUX_PROFILER_PPROF_INTERNAL_H
#define CLRMUX_PROFILER_PPROF_INTERNAL_H

#include "profiler/pprof.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NIL UINT32_MAX
#define MAX_SAMPLE_TYPES 64
#define INITIAL_CAP 64

#define DEFAULT_MAX_SAMPLES 65536
#define DEFAULT_MAX_FUNCTIONS 65536
#define DEFAULT_MAX_STRINGS 131072
#define DEFAULT_MAX_STRING_BYTES ((size_t)16 << 20)
#define DEFAULT_MAX_STACK_DEPTH 512

struct str_ent {
    uint32_t off;  /* offset in bytes */
    uint32_t len;  /* length without NUL */
    uint32_t hash;
    uint32_t next; /* chain, NIL = end */
    uint32_t func; /* function index using this name, NIL = none */
};

struct label_ent {
    int64_t num;
    uint32_t key;  /* string index */
    uint32_t str;  /* string index, 0 = numeric label */
    uint32_t unit; /* string index, 0 = none */
};

struct sample_ent {
    uint64_t hash;
    size_t loc_off; /* into locs */
    size_t lab_off; /* into labs */
    uint32_t n_loc;
    uint32_t n_lab;
    uint32_t next;
};

/* Growable array of fixed-size elements. */
struct vec {
    void *p;
    size_t cap; /* in elements */
};

struct clrmux_pprof_builder {
    clrmux_pprof_limits lim;
    size_t n_types;
    uint32_t type_str[MAX_SAMPLE_TYPES];
    uint32_t unit_str[MAX_SAMPLE_TYPES];
    bool has_period_type;
    uint32_t period_type_str, period_unit_str;
    int64_t period;
    uint32_t default_type_str; /* 0 = unset */

    /* strings */
    char *bytes;
    size_t bytes_len, bytes_cap;
    struct vec strs; /* struct str_ent */
    size_t n_strs;
    uint32_t *str_buckets;
    size_t str_nbuckets; /* power of two */

    /* functions (== locations): name string index */
    struct vec funcs; /* uint32_t */
    size_t n_funcs;

    /* samples */
    struct vec samples; /* struct sample_ent */
    size_t n_samples;
    struct vec values; /* int64_t, n_types per sample */
    struct vec locs;   /* uint64_t location ids */
    size_t n_locs;
    struct vec labs;   /* struct label_ent */
    size_t n_labs;
    uint32_t *sample_buckets;
    size_t sample_nbuckets;

    /* per-call scratch */
    struct vec scratch_locs; /* uint64_t */

    /* profile metadata */
    uint32_t comments[CLRMUX_PPROF_MAX_COMMENTS];
    size_t n_comments;
    int64_t time_nanos, duration_nanos;
    uint64_t dropped[CLRMUX_PPROF_DROP_REASON_COUNT];
    uint64_t truncated;

    /* everything before this mark belongs to the configuration */
    size_t cfg_n_strs, cfg_bytes_len;
};

/* Mark for all-or-nothing add_sample. */
struct mark {
    size_t n_strs, bytes_len, n_funcs;
};

static inline struct str_ent *str_at(const clrmux_pprof_builder *b, size_t i)
{
    return &((struct str_ent *)b->strs.p)[i];
}

static inline const char *str_text(const clrmux_pprof_builder *b, size_t i)
{
    return b->bytes + str_at(b, i)->off;
}

#endif
