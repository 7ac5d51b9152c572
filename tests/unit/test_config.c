/* Unit tests for src/loader/config.c: loader.conf parsing and validation (every problem
 * is a diagnostic with its line; only the key or child concerned is dropped), the
 * process include/exclude filter, and clrmux_parse_bool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "loader/config.h"

#define GUID_A "{11111111-2222-3333-4444-555555555555}"
#define GUID_B "aabbccdd-eeff-0011-2233-445566778899"

/* ---- fixtures and helpers ----------------------------------------------------------- */

static int setup(void **state)
{
    /* the config is large (children hold PATH_MAX paths): keep it off the stack */
    struct clrmux_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return -1;
    *state = cfg;
    return 0;
}

static int teardown(void **state)
{
    struct clrmux_config *cfg = *state;
    clrmux_config_free(cfg);
    free(cfg);
    return 0;
}

static void load(struct clrmux_config *cfg, const char *text)
{
    clrmux_config_free(cfg); /* a test may load twice; free is idempotent */
    clrmux_config_load_string(text, "loader.conf", "/etc/clrmux", cfg);
}

static void print_diags(const struct clrmux_config *cfg)
{
    for (size_t i = 0; i < cfg->ndiags; i++)
        print_message("  diag %zu: level %d line %d: %s\n", i, cfg->diags[i].level,
                      cfg->diags[i].line, cfg->diags[i].msg);
}

static void assert_no_diags(const struct clrmux_config *cfg)
{
    if (cfg->ndiags != 0)
        print_diags(cfg);
    assert_int_equal(cfg->ndiags, 0);
    assert_int_equal(cfg->dropped_diags, 0);
}

/* Asserts that diagnostic `i` is exactly (level, line) and its message contains `sub`. */
static void assert_diag(const struct clrmux_config *cfg, size_t i, int level, int line,
                        const char *sub)
{
    if (i >= cfg->ndiags) {
        print_diags(cfg);
        fail_msg("expected diagnostic %zu ('%s' at line %d), have %zu", i, sub, line, cfg->ndiags);
    }
    const struct clrmux_diag *d = &cfg->diags[i];
    if (d->level != level || d->line != line || !strstr(d->msg, sub)) {
        print_diags(cfg);
        fail_msg("diagnostic %zu: want level %d line %d '%s'; got level %d line %d '%s'", i,
                 level, line, sub, d->level, d->line, d->msg);
    }
}

/* Asserts that the file produced exactly one diagnostic, (level, line, sub). */
static void assert_one_diag(const struct clrmux_config *cfg, int level, int line, const char *sub)
{
    if (cfg->ndiags != 1)
        print_diags(cfg);
    assert_int_equal(cfg->ndiags, 1);
    assert_diag(cfg, 0, level, line, sub);
}

static const struct clrmux_child_conf *child(const struct clrmux_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->nchildren; i++)
        if (strcmp(cfg->children[i].name, name) == 0)
            return &cfg->children[i];
    fail_msg("no child '%s'", name);
    return NULL;
}

static void assert_clsid(const CLSID *g, uint32_t d1, uint16_t d2, uint16_t d3, const uint8_t d4[8])
{
    assert_int_equal(g->Data1, d1);
    assert_int_equal(g->Data2, d2);
    assert_int_equal(g->Data3, d3);
    assert_memory_equal(g->Data4, d4, 8);
}

static const uint8_t k_a4[8] = {0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};

/* A valid library child: good, kept and enabled. */
static void assert_good_lib(const struct clrmux_config *cfg, const char *name, const char *path)
{
    const struct clrmux_child_conf *c = child(cfg, name);
    assert_int_equal(c->invalid, 0);
    assert_int_equal(c->enabled, 1);
    assert_string_equal(c->path, path);
    assert_string_equal(c->builtin, "");
    assert_int_equal(c->has_clsid, 1);
    assert_clsid(&c->clsid, 0x11111111, 0x2222, 0x3333, k_a4);
}

/* Most malformed-input tests wrap the bad part between these two valid children. */
#define HEAD          \
    "[child first]\n" \
    "path = /lib/first.so\n" \
    "clsid = " GUID_A "\n" /* lines 1-3 */
#define TAIL                      \
    "[child last]\n"              \
    "path = /lib/last.so\n"       \
    "clsid = " GUID_A "\n"

static void assert_head_tail_valid(const struct clrmux_config *cfg)
{
    assert_good_lib(cfg, "first", "/lib/first.so");
    assert_good_lib(cfg, "last", "/lib/last.so");
    assert_int_equal(child(cfg, "first")->line, 1);
}

/* ---- a valid configuration ---------------------------------------------------------- */

static const char k_valid[] =
    "; clrmux configuration\n"                       /* 1 */
    "# another comment\n"                            /* 2 */
    "[loader]\n"                                     /* 3 */
    "log_level = debug\n"                            /* 4 */
    "log_file = logs/clrmux-%p.log\n"                /* 5 */
    "include_processes = App1; app2.exe , dotnet\n"  /* 6 */
    "exclude_processes = bad\n"                      /* 7 */
    "\n"                                             /* 8 */
    "[child alpha]\n"                                /* 9 */
    "path = /opt/alpha/libalpha.so\n"                /* 10 */
    "clsid = " GUID_A "\n"                           /* 11 */
    "enabled = true\n"                               /* 12 */
    "\n"                                             /* 13 */
    "[child beta]\n"                                 /* 14 */
    "path = lib/libbeta.so\n"                        /* 15 */
    "clsid = " GUID_B "\n"                           /* 16 */
    "enabled = no\n"                                 /* 17 */
    "\n"                                             /* 18 */
    "[child tr.1_x-y]\n"                             /* 19 */
    "builtin = tracer\n"                             /* 20 */
    "trace = System.*\n"                             /* 21 */
    "output = /tmp/trace-%p.txt\n"                   /* 22 */
    "trace = MyApp.Foo::Bar=1\n"                     /* 23 */
    "enabled = On\n";                                /* 24 */

static void check_valid(const struct clrmux_config *cfg)
{
    assert_no_diags(cfg);
    assert_int_equal(cfg->found, 1);
    assert_string_equal(cfg->path, "loader.conf");
    assert_string_equal(cfg->dir, "/etc/clrmux");
    assert_int_equal(cfg->log_level, CLRMUX_LOG_DEBUG);
    assert_int_equal(cfg->has_log_file, 1);
    assert_string_equal(cfg->log_file, "/etc/clrmux/logs/clrmux-%p.log");
    assert_string_equal(cfg->include_processes, "App1; app2.exe , dotnet");
    assert_string_equal(cfg->exclude_processes, "bad");

    assert_int_equal(cfg->nchildren, 3);
    const struct clrmux_child_conf *a = &cfg->children[0];
    assert_string_equal(a->name, "alpha");
    assert_int_equal(a->line, 9);
    assert_string_equal(a->path, "/opt/alpha/libalpha.so");
    assert_string_equal(a->builtin, "");
    assert_int_equal(a->has_clsid, 1);
    assert_clsid(&a->clsid, 0x11111111, 0x2222, 0x3333, k_a4);
    assert_int_equal(a->enabled, 1);
    assert_int_equal(a->invalid, 0);
    assert_int_equal(a->nkvs, 0);
    assert_null(a->kvs);

    const struct clrmux_child_conf *b = &cfg->children[1];
    static const uint8_t b4[8] = {0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99};
    assert_string_equal(b->name, "beta");
    assert_int_equal(b->line, 14);
    assert_string_equal(b->path, "/etc/clrmux/lib/libbeta.so");
    assert_string_equal(b->builtin, "");
    assert_int_equal(b->has_clsid, 1);
    assert_clsid(&b->clsid, 0xaabbccdd, 0xeeff, 0x0011, b4);
    assert_int_equal(b->enabled, 0);
    assert_int_equal(b->invalid, 0);
    assert_int_equal(b->nkvs, 0);

    const struct clrmux_child_conf *t = &cfg->children[2];
    assert_string_equal(t->name, "tr.1_x-y");
    assert_int_equal(t->line, 19);
    assert_string_equal(t->path, "");
    assert_string_equal(t->builtin, "tracer");
    assert_int_equal(t->has_clsid, 0);
    assert_int_equal(t->enabled, 1);
    assert_int_equal(t->invalid, 0);
    assert_int_equal(t->nkvs, 3);
    assert_string_equal(t->kvs[0].key, "trace");
    assert_string_equal(t->kvs[0].value, "System.*");
    assert_int_equal(t->kvs[0].line, 21);
    assert_string_equal(t->kvs[1].key, "output");
    assert_string_equal(t->kvs[1].value, "/tmp/trace-%p.txt");
    assert_int_equal(t->kvs[1].line, 22);
    assert_string_equal(t->kvs[2].key, "trace");
    assert_string_equal(t->kvs[2].value, "MyApp.Foo::Bar=1");
    assert_int_equal(t->kvs[2].line, 23);

    assert_int_equal(clrmux_config_active_children(cfg), 2); /* beta is disabled */
}

static void test_valid_config(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, k_valid);
    check_valid(cfg);
}

/* The same file with CRLF line endings: same result, no '\r' in any value. */
static void test_crlf_line_endings(void **state)
{
    struct clrmux_config *cfg = *state;
    char text[sizeof k_valid * 2];
    char *o = text;
    for (const char *s = k_valid; *s; s++) {
        if (*s == '\n') *o++ = '\r';
        *o++ = *s;
    }
    *o = 0;
    load(cfg, text);
    check_valid(cfg);
}

/* A UTF-8 BOM before the first line, which is a section header. */
static void test_utf8_bom(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "\xEF\xBB\xBF[loader]\n"
              "log_level = warn\n"
              "[child a]\n"
              "builtin = profiler\n");
    assert_no_diags(cfg);
    assert_int_equal(cfg->log_level, CLRMUX_LOG_WARN);
    assert_int_equal(cfg->nchildren, 1);
    assert_string_equal(cfg->children[0].builtin, "profiler");

    /* BOM before a comment */
    load(cfg, "\xEF\xBB\xBF; comment\n"
              "[child a]\n"
              "builtin = tracer\n");
    assert_no_diags(cfg);
    assert_int_equal(cfg->nchildren, 1);
    assert_int_equal(cfg->children[0].line, 2);
    assert_int_equal(clrmux_config_active_children(cfg), 1);
}

static void test_comments(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "# hash comment\n"                         /* 1 */
              "; semicolon comment\n"                    /* 2 */
              "[child a] ; after a header\n"             /* 3 */
              "   # indented comment\n"                  /* 4 */
              "path = /x/liba.so ; the library\n"        /* 5 */
              "  ; indented comment after a key\n"       /* 6 */
              "clsid = " GUID_A "   ; its clsid\n"       /* 7 */
              "enabled = false ; off for now\n"          /* 8 */
              "#[child b]\n"                             /* 9 */
              "#path = /y\n"                             /* 10 */
              "[child c]\n"                              /* 11 */
              "builtin = tracer\n"                       /* 12 */
              "arg = a;b\n"                              /* 13: ';' needs a space before it */
              "pattern = x#y # not a comment\n");        /* 14: '#' only starts a line comment */
    assert_no_diags(cfg);
    assert_int_equal(cfg->nchildren, 2);
    const struct clrmux_child_conf *a = child(cfg, "a");
    assert_string_equal(a->path, "/x/liba.so");
    assert_int_equal(a->has_clsid, 1);
    assert_int_equal(a->enabled, 0);
    assert_int_equal(a->invalid, 0);
    const struct clrmux_child_conf *c = child(cfg, "c");
    assert_int_equal(c->line, 11);
    assert_int_equal(c->nkvs, 2);
    assert_string_equal(c->kvs[0].value, "a;b");
    assert_string_equal(c->kvs[1].value, "x#y # not a comment");
    assert_int_equal(clrmux_config_active_children(cfg), 1);
}

/* ---- file-level cases --------------------------------------------------------------- */

static char g_tmpdir[256];

static void make_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/clrmux-cfg-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(g_tmpdir));
}

/* Writes `text` to a new file in g_tmpdir; returns its path in `out`. */
static void write_tmp(char *out, size_t outsz, const char *text)
{
    snprintf(out, outsz, "%s/loader-XXXXXX", g_tmpdir);
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
}

static void test_file_missing(void **state)
{
    struct clrmux_config *cfg = *state;
    make_tmpdir();
    char path[512];
    snprintf(path, sizeof path, "%s/nonexistent.conf", g_tmpdir);
    clrmux_config_load(path, cfg);
    assert_int_equal(cfg->found, 0);
    assert_int_equal(cfg->nchildren, 0);
    assert_int_equal(cfg->log_level, -1);
    assert_string_equal(cfg->path, path);
    assert_string_equal(cfg->dir, g_tmpdir);
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 0, "cannot read");
    assert_non_null(strstr(cfg->diags[0].msg, path));
    assert_int_equal(clrmux_config_active_children(cfg), 0);
    rmdir(g_tmpdir);
}

static void test_file_empty(void **state)
{
    struct clrmux_config *cfg = *state;
    make_tmpdir();
    char path[512];
    write_tmp(path, sizeof path, "");
    clrmux_config_load(path, cfg);
    assert_int_equal(cfg->found, 1);
    assert_int_equal(cfg->nchildren, 0);
    assert_int_equal(cfg->log_level, -1);
    assert_int_equal(cfg->has_log_file, 0);
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 0, "no [child NAME] section");
    unlink(path);
    rmdir(g_tmpdir);
}

static void test_file_relative_paths(void **state)
{
    struct clrmux_config *cfg = *state;
    make_tmpdir();
    char path[512], want[600];
    write_tmp(path, sizeof path,
              "[loader]\n"
              "log_file = clrmux.log\n"
              "[child rel]\n"
              "path = sub/librel.so\n"
              "clsid = " GUID_A "\n"
              "[child abs]\n"
              "path = /abs/libabs.so\n"
              "clsid = " GUID_B "\n");
    clrmux_config_load(path, cfg);
    assert_no_diags(cfg);
    assert_int_equal(cfg->found, 1);
    assert_string_equal(cfg->path, path);
    assert_string_equal(cfg->dir, g_tmpdir);
    snprintf(want, sizeof want, "%s/sub/librel.so", g_tmpdir);
    assert_string_equal(child(cfg, "rel")->path, want);
    assert_string_equal(child(cfg, "abs")->path, "/abs/libabs.so");
    snprintf(want, sizeof want, "%s/clrmux.log", g_tmpdir);
    assert_string_equal(cfg->log_file, want);
    assert_int_equal(clrmux_config_active_children(cfg), 2);

    /* a path with no '/' resolves against "." */
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(g_tmpdir), 0);
    clrmux_config_free(cfg);
    clrmux_config_load(strrchr(path, '/') + 1, cfg);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(cfg->found, 1);
    assert_string_equal(cfg->dir, ".");
    assert_string_equal(child(cfg, "rel")->path, "./sub/librel.so");
    unlink(path);
    rmdir(g_tmpdir);
}

/* Without a folder (load_string with dir NULL), relative paths stay as written. */
static void test_string_without_dir(void **state)
{
    struct clrmux_config *cfg = *state;
    clrmux_config_load_string("[child a]\npath = rel/liba.so\nclsid = " GUID_A "\n", "mem", NULL, cfg);
    assert_no_diags(cfg);
    assert_string_equal(cfg->dir, "");
    assert_string_equal(child(cfg, "a")->path, "rel/liba.so");
}

/* ---- malformed lines and sections --------------------------------------------------- */

static void test_line_without_equals(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "this line has no separator\n" /* 4 */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "malformed line");
    assert_non_null(strstr(cfg->diags[0].msg, "this line has no separator"));
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

/* An indented line that is not a continuation (right after a header) is still malformed. */
static void test_indented_garbage_after_header(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"           /* 4 */
              "   garbage here\n"       /* 5 */
              "builtin = tracer\n"      /* 6 */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 5, "malformed line");
    assert_int_equal(cfg->nchildren, 3);
    assert_int_equal(child(cfg, "mid")->invalid, 0);
    assert_head_tail_valid(cfg);
}

static void test_malformed_section_header(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child x\n"                 /* 4 */
              "path = /lib/other.so\n"     /* 5: ignored, not applied to 'first' */
              "enabled = false\n"          /* 6 */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "malformed section header");
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

static void test_unknown_section(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[loaders]\n"                /* 4 */
              "log_level = error\n"        /* 5: ignored */
              "path = /nope\n"             /* 6: ignored */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 4, "unknown section [loaders]");
    assert_int_equal(cfg->log_level, -1);
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

static void test_key_outside_section(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "log_level = debug\n"        /* 1 */
              "\n"                         /* 2 */
              "[child first]\n"            /* 3 */
              "path = /lib/first.so\n"
              "clsid = " GUID_A "\n");
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 1, "'log_level' outside any section");
    assert_int_equal(cfg->log_level, -1);
    assert_good_lib(cfg, "first", "/lib/first.so");
}

static void test_unknown_loader_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\n"                 /* 1 */
              "log_level = error\n"        /* 2 */
              "log_levle = trace\n"        /* 3 */
              "exclude_processes = csc\n"  /* 4 */
              "[child first]\n"
              "path = /lib/first.so\n"
              "clsid = " GUID_A "\n");
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 3, "unknown key 'log_levle' in [loader]");
    assert_int_equal(cfg->log_level, CLRMUX_LOG_ERROR);
    assert_string_equal(cfg->exclude_processes, "csc");
    assert_good_lib(cfg, "first", "/lib/first.so");
}

/* A library child's unknown key is a warning; the child stays valid. */
static void test_unknown_library_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "colour = blue\n"            /* 4 */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 4, "[child first]: unknown key 'colour'");
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_duplicate_child_name(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child first]\n"            /* 4 */
              "path = /lib/second.so\n"    /* 5: ignored */
              "enabled = false\n"          /* 6: ignored */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "duplicate child name (first defined at line 1)");
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_child_name_with_spaces(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child my child]\n"         /* 4 */
              "builtin = tracer\n"
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child my child]: a child needs a name");
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

static void test_child_name_too_long(void **state)
{
    struct clrmux_config *cfg = *state;
    char n63[64], n64[65], text[1024];
    memset(n63, 'n', 63), n63[63] = 0;
    memset(n64, 'm', 64), n64[64] = 0;
    snprintf(text, sizeof text,
             HEAD
             "[child %s]\n"   /* 4: 64 characters */
             "builtin = tracer\n"
             "[child %s]\n"   /* 6: 63 characters, the longest accepted */
             "builtin = profiler\n"
             TAIL, n64, n63);
    load(cfg, text);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "a child needs a name of 1-63");
    assert_int_equal(cfg->nchildren, 3);
    assert_int_equal(child(cfg, n63)->line, 6);
    assert_string_equal(child(cfg, n63)->builtin, "profiler");
    assert_head_tail_valid(cfg);
}

static void test_child_name_empty(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child]\n"                  /* 4 */
              "builtin = tracer\n"
              "[child   ]\n"               /* 6 */
              "builtin = tracer\n"
              "[child/x]\n"                /* 8: not "child NAME": an unknown section */
              TAIL);
    assert_int_equal(cfg->ndiags, 3);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 4, "a child needs a name");
    assert_diag(cfg, 1, CLRMUX_LOG_ERROR, 6, "a child needs a name");
    assert_diag(cfg, 2, CLRMUX_LOG_WARN, 8, "unknown section [child/x]");
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

/* Each bad clsid invalidates only its child. */
static void check_bad_clsid(void **state, const char *clsid)
{
    struct clrmux_config *cfg = *state;
    char text[1024];
    snprintf(text, sizeof text,
             HEAD
             "[child mid]\n"          /* 4 */
             "path = /lib/mid.so\n"   /* 5 */
             "clsid = %s\n"           /* 6 */
             TAIL, clsid);
    load(cfg, text);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 6, "is not a GUID");
    assert_non_null(strstr(cfg->diags[0].msg, "[child mid]"));
    assert_int_equal(cfg->nchildren, 3);
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_int_equal(child(cfg, "mid")->has_clsid, 0);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_clsid_wrong_length(void **state)
{
    check_bad_clsid(state, "{11111111-2222-3333-4444-55555555555}");
    check_bad_clsid(state, "11111111-2222-3333-4444-5555555555555");
}

static void test_clsid_non_hex(void **state)
{
    check_bad_clsid(state, "{1111111G-2222-3333-4444-555555555555}");
}

static void test_clsid_missing_dashes(void **state)
{
    check_bad_clsid(state, "11111111222233334444555555555555");
    check_bad_clsid(state, "111111112-222-3333-4444-555555555555"); /* right length, dash misplaced */
}

static void test_clsid_brace_mismatch(void **state)
{
    check_bad_clsid(state, "{11111111-2222-3333-4444-555555555555");
    check_bad_clsid(state, "11111111-2222-3333-4444-555555555555}");
}

static void test_clsid_missing(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "path = /lib/mid.so\n"
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child mid]: needs 'clsid'");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_path_and_builtin_missing(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "clsid = " GUID_B "\n"
              "enabled = true\n"
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child mid]: needs 'path'");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_path_and_builtin_both(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "builtin = tracer\n"
              "path = /lib/mid.so\n"
              "clsid = " GUID_B "\n"
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child mid]: has both 'builtin' and 'path'");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_empty_path(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "path =\n"                   /* 5 */
              "clsid = " GUID_B "\n"
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 5, "[child mid]: empty path");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_enabled_not_bool(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "path = /lib/mid.so\n"
              "clsid = " GUID_B "\n"
              "enabled = maybe\n"          /* 7 */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 7, "enabled = 'maybe' is not true or false");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_unknown_builtin(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "[child mid]\n"              /* 4 */
              "builtin = sampler\n"        /* 5 */
              "rate = 10\n"                /* no extra "unknown key" for an invalid child */
              "[child mid2]\n"             /* 7 */
              "builtin = Tracer\n"         /* 8: case-sensitive */
              TAIL);
    assert_int_equal(cfg->ndiags, 2);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 5, "unknown builtin 'sampler'");
    assert_diag(cfg, 1, CLRMUX_LOG_ERROR, 8, "unknown builtin 'Tracer'");
    assert_int_equal(child(cfg, "mid")->invalid, 1);
    assert_int_equal(child(cfg, "mid2")->invalid, 1);
    assert_head_tail_valid(cfg);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
}

static void test_duplicate_child_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[child first]\n"            /* 1 */
              "path = /lib/first.so\n"     /* 2 */
              "clsid = " GUID_A "\n"       /* 3 */
              "path = /lib/other.so\n"     /* 4 */
              "enabled = yes\n"            /* 5 */
              "enabled = no\n"             /* 6 */
              "clsid = " GUID_B "\n"       /* 7 */
              TAIL);
    assert_int_equal(cfg->ndiags, 3);
    assert_diag(cfg, 0, CLRMUX_LOG_WARN, 4, "duplicate key 'path'; the first value is kept");
    assert_diag(cfg, 1, CLRMUX_LOG_WARN, 6, "duplicate key 'enabled'");
    assert_diag(cfg, 2, CLRMUX_LOG_WARN, 7, "duplicate key 'clsid'");
    assert_head_tail_valid(cfg); /* path, clsid and enabled are the first values */
}

static void test_duplicate_loader_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\n"                       /* 1 */
              "log_level = trace\n"              /* 2 */
              "log_level = error\n"              /* 3 */
              "include_processes = a\n"          /* 4 */
              "[loader]\n"                       /* 5 */
              "include_processes = b\n"          /* 6 */
              HEAD);
    /* the "set once" check is per section: a second [loader] section can override */
    assert_int_equal(cfg->ndiags, 1);
    assert_diag(cfg, 0, CLRMUX_LOG_WARN, 3, "duplicate key 'log_level'");
    assert_int_equal(cfg->log_level, CLRMUX_LOG_TRACE);
    assert_string_equal(cfg->include_processes, "b");
    assert_good_lib(cfg, "first", "/lib/first.so");
}

static void test_bad_log_level(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\n"                       /* 1 */
              "log_level = verbose\n"            /* 2 */
              "log_file = /var/log/clrmux.log\n" /* 3 */
              HEAD);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 2, "log_level 'verbose' is not one of");
    assert_int_equal(cfg->log_level, -1);
    assert_int_equal(cfg->has_log_file, 1);
    assert_string_equal(cfg->log_file, "/var/log/clrmux.log");
    assert_good_lib(cfg, "first", "/lib/first.so");
}

/* `log_file =` (empty) means stderr: set, but no path. */
static void test_empty_log_file(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\nlog_file =\nlog_level = WARNING\n" HEAD);
    assert_no_diags(cfg);
    assert_int_equal(cfg->has_log_file, 1);
    assert_string_equal(cfg->log_file, "");
    assert_int_equal(cfg->log_level, CLRMUX_LOG_WARN);
}

/* inih reads at most 198 characters per line: a longer line is dropped alone. */
static void test_line_too_long(void **state)
{
    struct clrmux_config *cfg = *state;
    char v186[187], v187[188], text[2048];
    memset(v186, 'a', 186), v186[186] = 0;
    memset(v187, 'b', 187), v187[187] = 0;
    snprintf(text, sizeof text,
             HEAD
             "[child tr]\n"          /* 4 */
             "builtin = tracer\n"    /* 5 */
             "trace = one\n"         /* 6 */
             "pattern = %s\n"        /* 7: 10 + 186 = 196 characters */
             "pattern = %s\n"        /* 8: 197 characters */
             "trace = two\n"         /* 9 */
             TAIL, v186, v187);
    load(cfg, text);
    assert_no_diags(cfg);
    assert_int_equal(child(cfg, "tr")->nkvs, 4);

    char v188[189], v189[190], v300[301];
    memset(v188, 'c', 188), v188[188] = 0;
    memset(v189, 'd', 189), v189[189] = 0;
    memset(v300, 'e', 300), v300[300] = 0;
    snprintf(text, sizeof text,
             HEAD
             "[child tr]\n"          /* 4 */
             "builtin = tracer\n"    /* 5 */
             "trace = one\n"         /* 6 */
             "pattern = %s\n"        /* 7: 198 characters: the longest accepted */
             "pattern = %s\n"        /* 8: 199 characters: dropped */
             "pattern = %s\n"        /* 9: 310 characters: dropped */
             "trace = two\n"         /* 10 */
             TAIL, v188, v189, v300);
    load(cfg, text);
    assert_int_equal(cfg->ndiags, 2);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 8, "line longer than 198 characters");
    assert_diag(cfg, 1, CLRMUX_LOG_ERROR, 9, "line longer than 198 characters");
    const struct clrmux_child_conf *t = child(cfg, "tr");
    assert_int_equal(t->invalid, 0);
    assert_int_equal(t->nkvs, 3);
    assert_string_equal(t->kvs[0].value, "one");
    assert_string_equal(t->kvs[1].value, v188);
    assert_int_equal(t->kvs[1].line, 7);
    assert_string_equal(t->kvs[2].value, "two");
    assert_int_equal(t->kvs[2].line, 10);
    assert_head_tail_valid(cfg);
}

/* A too-long section header: its keys must not be applied to the previous child. */
static void test_section_header_too_long(void **state)
{
    struct clrmux_config *cfg = *state;
    char name[250], text[2048];
    memset(name, 'x', 249), name[249] = 0;
    snprintf(text, sizeof text,
             HEAD
             "[child %s]\n"          /* 4 */
             "path = /lib/long.so\n" /* 5: ignored */
             "enabled = false\n"     /* 6: ignored */
             TAIL, name);
    load(cfg, text);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "longer than 198 characters; section header ignored");
    assert_int_equal(cfg->nchildren, 2);
    assert_head_tail_valid(cfg);
}

static void test_too_many_children(void **state)
{
    struct clrmux_config *cfg = *state;
    size_t cap = (CLRMUX_MAX_CHILDREN + 2) * 64;
    char *text = malloc(cap), *o = text;
    assert_non_null(text);
    for (int i = 0; i < CLRMUX_MAX_CHILDREN + 2; i++) /* 2 lines each */
        o += sprintf(o, "[child c%d]\nbuiltin = %s\n", i, i % 2 ? "tracer" : "profiler");
    load(cfg, text);
    free(text);
    assert_int_equal(cfg->nchildren, CLRMUX_MAX_CHILDREN);
    assert_int_equal(cfg->ndiags, 2);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 2 * CLRMUX_MAX_CHILDREN + 1, "[child c64]: more than 64 children");
    assert_diag(cfg, 1, CLRMUX_LOG_ERROR, 2 * CLRMUX_MAX_CHILDREN + 3, "[child c65]: more than 64 children");
    assert_string_equal(cfg->children[CLRMUX_MAX_CHILDREN - 1].name, "c63");
    assert_string_equal(cfg->children[CLRMUX_MAX_CHILDREN - 1].builtin, "tracer");
    assert_int_equal(clrmux_config_active_children(cfg), CLRMUX_MAX_CHILDREN);
}

static void test_continuation_line(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[child first]\n"            /* 1 */
              "path = /lib/first.so\n"     /* 2 */
              "    /lib/more.so\n"         /* 3 */
              "clsid = " GUID_A "\n"       /* 4 */
              "[child tr]\n"               /* 5 */
              "builtin = tracer\n"         /* 6 */
              "trace = A\n"                /* 7 */
              "\n"                         /* 8 */
              "\tB\n"                      /* 9: still a continuation for inih */
              "# comment\n"                /* 10 */
              "  C = D\n"                  /* 11: so is this */
              TAIL);
    assert_int_equal(cfg->ndiags, 3);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 3, "continuation lines are not supported");
    assert_diag(cfg, 1, CLRMUX_LOG_ERROR, 9, "continuation lines are not supported");
    assert_diag(cfg, 2, CLRMUX_LOG_ERROR, 11, "continuation lines are not supported");
    const struct clrmux_child_conf *t = child(cfg, "tr");
    assert_int_equal(t->invalid, 0);
    assert_int_equal(t->nkvs, 1);
    assert_string_equal(t->kvs[0].value, "A");
    assert_head_tail_valid(cfg);
}

/* Right after a header an indented key is an ordinary key; an indented header right
 * after a header is a header. */
static void test_indented_first_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[child first]\n"
              "   path = /lib/first.so\n"
              "clsid = " GUID_A "\n"
              "[child mid]\n"
              "  [child last]\n"
              "\tpath = /lib/last.so\n"
              "clsid = " GUID_A "\n");
    /* 'mid' is an empty section */
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child mid]: needs 'path'");
    assert_head_tail_valid(cfg);
}

/* After a key, inih folds an indented line into that key's value, even one that looks like a
 * header or a key: reported at its line, and the next unindented key is read normally. */
static void test_indented_header_after_key(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD
              "  [child mid]\n"            /* 4 */
              "enabled = false\n"          /* 5: still in [child first] */
              TAIL);
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "continuation lines are not supported");
    assert_int_equal(cfg->nchildren, 2);
    assert_int_equal(child(cfg, "first")->enabled, 0);
    assert_int_equal(child(cfg, "first")->invalid, 0);
    assert_good_lib(cfg, "last", "/lib/last.so");
}

/* The last line, with or without a newline, is checked once. */
static void test_last_line(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, HEAD "[child z]");
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child z]: needs 'path'");
    assert_int_equal(cfg->nchildren, 2);
    load(cfg, HEAD "[child z]\n");
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "[child z]: needs 'path'");
    load(cfg, HEAD "junk");
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 4, "malformed line");
    load(cfg, HEAD "enabled = off");
    assert_no_diags(cfg);
    assert_int_equal(child(cfg, "first")->enabled, 0);
    load(cfg, HEAD "[loader]");
    assert_no_diags(cfg);
}

/* More problems than CLRMUX_MAX_DIAGS: the rest are counted. */
static void test_diag_overflow(void **state)
{
    struct clrmux_config *cfg = *state;
    size_t n = CLRMUX_MAX_DIAGS + 10;
    char *text = malloc(n * 8 + 256), *o = text;
    assert_non_null(text);
    o += sprintf(o, HEAD);
    for (size_t i = 0; i < n; i++)
        o += sprintf(o, "junk\n");
    load(cfg, text);
    free(text);
    assert_int_equal(cfg->ndiags, CLRMUX_MAX_DIAGS);
    assert_int_equal(cfg->dropped_diags, 10);
    assert_diag(cfg, 0, CLRMUX_LOG_ERROR, 4, "malformed line");
    assert_diag(cfg, CLRMUX_MAX_DIAGS - 1, CLRMUX_LOG_ERROR, 3 + CLRMUX_MAX_DIAGS, "malformed line");
    assert_good_lib(cfg, "first", "/lib/first.so");
}

/* ---- active children, kvs ----------------------------------------------------------- */

static void test_active_children(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[child on]\nbuiltin = tracer\n"
              "[child off]\nbuiltin = tracer\nenabled = 0\n"
              "[child bad]\nbuiltin = nope\n"
              "[child badoff]\nbuiltin = nope\nenabled = off\n"
              "[child lib]\npath = x.so\nclsid = " GUID_A "\nenabled = TRUE\n"
              "[child nolib]\npath = y.so\n");
    assert_int_equal(cfg->nchildren, 6);
    assert_int_equal(clrmux_config_active_children(cfg), 2);
    assert_int_equal(child(cfg, "off")->enabled, 0);
    assert_int_equal(child(cfg, "off")->invalid, 0);
    assert_int_equal(child(cfg, "bad")->invalid, 1);
    assert_int_equal(child(cfg, "nolib")->invalid, 1);
    assert_string_equal(child(cfg, "lib")->path, "/etc/clrmux/x.so");

    load(cfg, "[loader]\nlog_level = info\n");
    assert_int_equal(clrmux_config_active_children(cfg), 0);
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 0, "no [child NAME] section");
}

/* Builtin children keep every other key; load/free/load cycles leak nothing (ASan). */
static void test_kvs_freed(void **state)
{
    struct clrmux_config *cfg = *state;
    for (int round = 0; round < 3; round++) {
        load(cfg, "[child a]\nbuiltin = tracer\nk1 = v1\nk2 = v2\n"
                  "[child b]\nbuiltin = profiler\nk3 = v3\n");
        assert_int_equal(child(cfg, "a")->nkvs, 2);
        assert_int_equal(child(cfg, "b")->nkvs, 1);
        assert_string_equal(child(cfg, "b")->kvs[0].key, "k3");
        clrmux_config_free(cfg);
        assert_int_equal(cfg->children[0].nkvs, 0);
        assert_null(cfg->children[0].kvs);
        assert_null(cfg->children[1].kvs);
    }
    /* an invalid builtin's keys are kept too, and freed */
    load(cfg, "[child a]\nbuiltin = nope\nk1 = v1\n");
    assert_int_equal(child(cfg, "a")->nkvs, 1);
}

/* ---- clrmux_parse_bool -------------------------------------------------------------- */

static void test_parse_bool(void **state)
{
    (void)state;
    static const struct { const char *s; int want; } cases[] = {
        {"true", 1}, {"TRUE", 1}, {"True", 1}, {"yes", 1}, {"YES", 1}, {"on", 1}, {"On", 1}, {"1", 1},
        {"false", 0}, {"FALSE", 0}, {"no", 0}, {"No", 0}, {"off", 0}, {"OFF", 0}, {"0", 0},
        {"", -1}, {"maybe", -1}, {"2", -1}, {"-1", -1}, {"truee", -1}, {"tru", -1}, {" true", -1},
        {"true ", -1}, {"y", -1}, {"n", -1}, {"enabled", -1}, {"00", -1}, {"nope", -1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = clrmux_parse_bool(cases[i].s);
        if (got != cases[i].want)
            fail_msg("clrmux_parse_bool(\"%s\") = %d, want %d", cases[i].s, got, cases[i].want);
    }
}

/* ---- clrmux_config_process_allowed -------------------------------------------------- */

static int allowed(const struct clrmux_config *cfg, const char *exe, const char *app,
                   const char *why_sub)
{
    const char *why = NULL;
    int r = clrmux_config_process_allowed(cfg, exe, app, &why);
    assert_non_null(why);
    assert_true(why[0] != 0);
    if (why_sub && !strstr(why, why_sub))
        fail_msg("%s/%s: why = '%s', want '%s'", exe, app, why, why_sub);
    return r;
}

static void set_lists(struct clrmux_config *cfg, const char *inc, const char *exc)
{
    snprintf(cfg->include_processes, sizeof cfg->include_processes, "%s", inc);
    snprintf(cfg->exclude_processes, sizeof cfg->exclude_processes, "%s", exc);
}

static void test_process_no_filter(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\nlog_level = info\n");
    assert_true(allowed(cfg, "anything", "", "no process filter"));
    assert_true(allowed(cfg, "dotnet", "App", "no process filter"));
    set_lists(cfg, " ; , ", ""); /* only separators: no include list */
    assert_true(allowed(cfg, "anything", "", "no process filter"));
}

static void test_process_include(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\ninclude_processes = MyService; worker.exe , App2,,;  spaced name  \n");
    assert_true(allowed(cfg, "MyService", "", "listed in include_processes"));
    assert_true(allowed(cfg, "MyService.exe", "", "listed in include_processes"));
    assert_true(allowed(cfg, "MyService.EXE", "", NULL));
    assert_true(allowed(cfg, "worker", "", NULL));
    assert_true(allowed(cfg, "worker.exe", "", NULL));
    assert_true(allowed(cfg, "App2", "", NULL));
    assert_true(allowed(cfg, "spaced name", "", NULL));
    assert_false(allowed(cfg, "other", "", "not listed in include_processes"));
    assert_false(allowed(cfg, "MyServ", "", "not listed"));
    assert_false(allowed(cfg, "MyServiceX", "", "not listed"));
    assert_false(allowed(cfg, "", "", "not listed"));
    assert_false(allowed(cfg, "exe", "", "not listed"));
    /* the dotnet host running App2.dll matches by app name */
    assert_true(allowed(cfg, "dotnet", "App2", "listed in include_processes"));
    assert_false(allowed(cfg, "dotnet", "Other", "not listed"));
    assert_false(allowed(cfg, "dotnet", "", "not listed"));
}

static void test_process_exclude(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\nexclude_processes = csc; VBCSCompiler,MSBuild.exe\n");
    assert_false(allowed(cfg, "csc", "", "listed in exclude_processes"));
    assert_false(allowed(cfg, "csc.exe", "", "exclude_processes"));
    assert_false(allowed(cfg, "VBCSCompiler", "", "exclude_processes"));
    assert_false(allowed(cfg, "MSBuild", "", "exclude_processes"));
    assert_false(allowed(cfg, "MSBuild.exe", "", "exclude_processes"));
    assert_false(allowed(cfg, "dotnet", "MSBuild", "exclude_processes"));
    assert_true(allowed(cfg, "dotnet", "App", "no process filter"));
    assert_true(allowed(cfg, "cscx", "", "no process filter"));
    assert_true(allowed(cfg, "dotnet", "", "no process filter"));
}

static void test_process_exclude_wins(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\ninclude_processes = dotnet, App\nexclude_processes = App; tool\n");
    assert_false(allowed(cfg, "App", "", "listed in exclude_processes"));
    /* dotnet is included, but the app it runs is excluded */
    assert_false(allowed(cfg, "dotnet", "App", "listed in exclude_processes"));
    assert_false(allowed(cfg, "dotnet", "tool", "exclude_processes"));
    assert_true(allowed(cfg, "dotnet", "Other", "listed in include_processes"));
    assert_false(allowed(cfg, "Other", "", "not listed in include_processes"));
}

/* [loader] enable_control (default true) and perf_map (default false) */
static void test_control_keys(void **state)
{
    struct clrmux_config *cfg = *state;
    load(cfg, "[loader]\n[child a]\nbuiltin = tracer\n");
    assert_int_equal(cfg->control_disabled, 0);
    assert_int_equal(cfg->perf_map, 0);
    load(cfg, "[loader]\nenable_control = false\nperf_map = yes\n[child a]\nbuiltin = tracer\n");
    assert_no_diags(cfg);
    assert_int_equal(cfg->control_disabled, 1);
    assert_int_equal(cfg->perf_map, 1);
    load(cfg, "[loader]\nenable_control = sometimes\n[child a]\nbuiltin = tracer\n");
    assert_one_diag(cfg, CLRMUX_LOG_ERROR, 2, "enable_control = 'sometimes' is not true or false; ignored");
    assert_int_equal(cfg->control_disabled, 0);
    load(cfg, "[loader]\nperf_map = true\nperf_map = false\n[child a]\nbuiltin = tracer\n");
    assert_one_diag(cfg, CLRMUX_LOG_WARN, 3, "duplicate key 'perf_map'");
    assert_int_equal(cfg->perf_map, 1);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_valid_config),
        T(test_control_keys),
        T(test_crlf_line_endings),
        T(test_utf8_bom),
        T(test_comments),
        T(test_file_missing),
        T(test_file_empty),
        T(test_file_relative_paths),
        T(test_string_without_dir),
        T(test_line_without_equals),
        T(test_indented_garbage_after_header),
        T(test_malformed_section_header),
        T(test_unknown_section),
        T(test_key_outside_section),
        T(test_unknown_loader_key),
        T(test_unknown_library_key),
        T(test_duplicate_child_name),
        T(test_child_name_with_spaces),
        T(test_child_name_too_long),
        T(test_child_name_empty),
        T(test_clsid_wrong_length),
        T(test_clsid_non_hex),
        T(test_clsid_missing_dashes),
        T(test_clsid_brace_mismatch),
        T(test_clsid_missing),
        T(test_path_and_builtin_missing),
        T(test_path_and_builtin_both),
        T(test_empty_path),
        T(test_enabled_not_bool),
        T(test_unknown_builtin),
        T(test_duplicate_child_key),
        T(test_duplicate_loader_key),
        T(test_bad_log_level),
        T(test_empty_log_file),
        T(test_line_too_long),
        T(test_section_header_too_long),
        T(test_too_many_children),
        T(test_continuation_line),
        T(test_indented_first_key),
        T(test_indented_header_after_key),
        T(test_last_line),
        T(test_diag_overflow),
        T(test_active_children),
        T(test_kvs_freed),
        T(test_parse_bool),
        T(test_process_no_filter),
        T(test_process_include),
        T(test_process_exclude),
        T(test_process_exclude_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
