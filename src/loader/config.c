#include "loader/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/guid.h"
#include "common/log.h"
#include "common/platform.h"
#include "common/trust.h"

/* inih (Debian's build) reads at most INI_MAX_LINE - 1 characters per line. */
#define LINE_MAX_CHARS (INI_MAX_LINE - 2)

struct parser {
    struct clrmux_config *cfg;
    const char *pos, *end; /* the text not yet read */
    int line;              /* physical line most recently handed to inih */
    int handled;           /* last line on which the handler ran */
    int checked;           /* last line check_previous_line looked at */
    int after_key;         /* inih's prev_name is set: an indented line continues a value */
    char text[INI_MAX_LINE];
    int line_too_long;
    int long_section;      /* the too-long line was a section header */
    /* current section as the reader saw it */
    enum { SEC_NONE, SEC_LOADER, SEC_CHILD, SEC_UNKNOWN } sec;
    struct clrmux_child_conf *child; /* when sec == SEC_CHILD and the child is kept */
    unsigned seen_keys;              /* bit per known key already set in this section */
};

static void diag(struct clrmux_config *cfg, int level, int line, const char *fmt, ...)
    __attribute__((format(CLRMUX_PRINTF_FORMAT, 4, 5)));
static void diag(struct clrmux_config *cfg, int level, int line, const char *fmt, ...)
{
    if (cfg->ndiags == CLRMUX_MAX_DIAGS) {
        cfg->dropped_diags++;
        return;
    }
    struct clrmux_diag *d = &cfg->diags[cfg->ndiags++];
    d->level = level;
    d->line = line;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->msg, sizeof d->msg, fmt, ap);
    va_end(ap);
}

int clrmux_parse_bool(const char *s)
{
    static const char *const t[] = {"true", "yes", "on", "1"};
    static const char *const f[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, t[i]) == 0) return 1;
        if (strcasecmp(s, f[i]) == 0) return 0;
    }
    return -1;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = 0;
    return s;
}

static int valid_name(const char *s)
{
    if (!*s || strlen(s) >= CLRMUX_NAME_MAX) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return 0;
    return 1;
}

/* A section header as the reader sees it: sets p->sec / p->child. */
static void begin_section(struct parser *p, char *t)
{
    struct clrmux_config *cfg = p->cfg;
    p->child = NULL;
    p->seen_keys = 0;
    char *close = strchr(t, ']');
    if (!close) {
        p->sec = SEC_UNKNOWN;
        diag(cfg, CLRMUX_LOG_ERROR, p->line, "malformed section header (no ']'); keys up to the next section are ignored");
        return;
    }
    *close = 0;
    p->after_key = 0; /* inih forgets the previous key at a complete header */
    char *name = trim(t + 1);
    if (strcasecmp(name, "loader") == 0) {
        p->sec = SEC_LOADER;
        return;
    }
    if (strncasecmp(name, "child", 5) == 0 && (name[5] == 0 || isspace((unsigned char)name[5]))) {
        p->sec = SEC_CHILD;
        char *cname = trim(name + 5);
        if (!valid_name(cname)) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line,
                 "[child %s]: a child needs a name of 1-63 letters, digits, '_', '-' or '.'; section skipped", cname);
            return;
        }
        for (size_t i = 0; i < cfg->nchildren; i++) {
            if (strcmp(cfg->children[i].name, cname) == 0) {
                diag(cfg, CLRMUX_LOG_ERROR, p->line,
                     "[child %s]: duplicate child name (first defined at line %d); this section is skipped",
                     cname, cfg->children[i].line);
                return;
            }
        }
        if (cfg->nchildren == CLRMUX_MAX_CHILDREN) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: more than %d children; section skipped",
                 cname, CLRMUX_MAX_CHILDREN);
            return;
        }
        struct clrmux_child_conf *c = &cfg->children[cfg->nchildren++];
        memset(c, 0, sizeof *c);
        snprintf(c->name, sizeof c->name, "%s", cname);
        c->line = p->line;
        c->enabled = 1;
        p->child = c;
        return;
    }
    p->sec = SEC_UNKNOWN;
    diag(cfg, CLRMUX_LOG_WARN, p->line, "unknown section [%s]; its keys are ignored (expected [loader] or [child NAME])", name);
}

/* Called before inih reads the next line: reports the previous line if inih rejected it. */
static void check_previous_line(struct parser *p)
{
    if (p->line == 0 || p->handled == p->line || p->checked == p->line)
        return;
    p->checked = p->line; /* the reader and parse_file both call this after the last line */
    if (p->line_too_long) {
        if (p->long_section) {
            /* keys up to the next header must not land in the previous section */
            p->sec = SEC_UNKNOWN;
            p->child = NULL;
            diag(p->cfg, CLRMUX_LOG_ERROR, p->line,
                 "line longer than %d characters; section header ignored with its keys", LINE_MAX_CHARS);
            return;
        }
        diag(p->cfg, CLRMUX_LOG_ERROR, p->line, "line longer than %d characters; ignored", LINE_MAX_CHARS);
        return;
    }
    char buf[INI_MAX_LINE];
    snprintf(buf, sizeof buf, "%s", p->text);
    char *t = buf;
    if (p->line == 1 && strncmp(t, "\xEF\xBB\xBF", 3) == 0)
        t += 3; /* UTF-8 BOM, skipped by inih too */
    t = trim(t);
    if (*t == 0 || *t == ';' || *t == '#')
        return;
    if (*t == '[') {
        begin_section(p, t);
        return;
    }
    diag(p->cfg, CLRMUX_LOG_ERROR, p->line, "malformed line (expected 'key = value', '[section]' or a comment): '%.60s'", t);
}

static char *reader(char *str, int num, void *stream)
{
    struct parser *p = stream;
    check_previous_line(p);
    /* as fgets: at most num - 1 bytes, up to and with the '\n' */
    if (p->pos >= p->end || num < 2)
        return NULL;
    size_t n = 0;
    while (n < (size_t)num - 1 && p->pos < p->end) {
        char c = *p->pos++;
        str[n++] = c;
        if (c == '\n')
            break;
    }
    str[n] = 0;
    char *s = str;
    p->line++;
    p->line_too_long = 0;
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] != '\n' && p->pos < p->end) {
        /* longer than inih accepts: swallow the rest and hand inih an empty comment */
        while (p->pos < p->end && *p->pos++ != '\n') {
        }
        p->line_too_long = 1;
        const char *t = s;
        if (p->line == 1 && strncmp(t, "\xEF\xBB\xBF", 3) == 0) t += 3;
        while (isspace((unsigned char)*t)) t++;
        p->long_section = *t == '[';
        snprintf(str, (size_t)num, ";\n");
    }
    snprintf(p->text, sizeof p->text, "%s", str);
    return s;
}

enum { K_PATH = 1, K_CLSID = 2, K_ENABLED = 4, K_BUILTIN = 8, K_LEVEL = 16, K_FILE = 32, K_INC = 64, K_EXC = 128, K_INSECURE = 256,
       K_CONTROL = 512, K_PERFMAP = 1024 };

static int once(struct parser *p, unsigned bit, const char *key)
{
    if (p->seen_keys & bit) {
        diag(p->cfg, CLRMUX_LOG_WARN, p->line, "duplicate key '%s'; the first value is kept", key);
        return 0;
    }
    p->seen_keys |= bit;
    return 1;
}

/* Resolves `v` against the config's folder. Returns 0, or -1 when it does not fit. */
static int resolve_path(const struct clrmux_config *cfg, const char *v, char *out, size_t outsz)
{
    int n;
    if (clrmux_path_is_absolute(v) || cfg->dir[0] == 0)
        n = snprintf(out, outsz, "%s", v);
    else
        n = snprintf(out, outsz, "%s/%s", cfg->dir, v);
    if (n < 0 || (size_t)n >= outsz) {
        out[0] = 0;
        return -1;
    }
    return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    struct parser *p = user;
    struct clrmux_config *cfg = p->cfg;
    (void)section;
    /* inih folds an indented line into the previous key's value, even after blank or
     * comment lines; right after a header it is an ordinary key */
    int continuation = p->after_key && isspace((unsigned char)p->text[0]);
    p->handled = p->line;
    p->after_key = 1;
    if (continuation) {
        diag(cfg, CLRMUX_LOG_ERROR, p->line, "continuation lines are not supported; line ignored");
        return 1;
    }
    if (p->sec == SEC_NONE) {
        diag(cfg, CLRMUX_LOG_WARN, p->line, "key '%s' outside any section; ignored", name);
        return 1;
    }
    if (p->sec == SEC_UNKNOWN || (p->sec == SEC_CHILD && !p->child))
        return 1; /* the section header was already reported */
    if (p->sec == SEC_LOADER) {
        if (strcmp(name, "log_level") == 0) {
            if (!once(p, K_LEVEL, name)) return 1;
            int lvl = clrmux_log_level_parse(value);
            if (lvl < 0)
                diag(cfg, CLRMUX_LOG_ERROR, p->line, "log_level '%s' is not one of error|warn|info|debug|trace; ignored", value);
            else
                cfg->log_level = lvl;
        } else if (strcmp(name, "log_file") == 0) {
            if (!once(p, K_FILE, name)) return 1;
            if (value[0] && resolve_path(cfg, value, cfg->log_file, sizeof cfg->log_file) != 0)
                diag(cfg, CLRMUX_LOG_ERROR, p->line, "log_file path too long; logging to stderr");
            cfg->has_log_file = 1;
        } else if (strcmp(name, "include_processes") == 0) {
            if (!once(p, K_INC, name)) return 1;
            snprintf(cfg->include_processes, sizeof cfg->include_processes, "%s", value);
        } else if (strcmp(name, "exclude_processes") == 0) {
            if (!once(p, K_EXC, name)) return 1;
            snprintf(cfg->exclude_processes, sizeof cfg->exclude_processes, "%s", value);
        } else if (strcmp(name, "allow_insecure_paths") == 0) {
            if (!once(p, K_INSECURE, name)) return 1;
            int b = clrmux_parse_bool(value);
            if (b < 0)
                diag(cfg, CLRMUX_LOG_ERROR, p->line, "allow_insecure_paths = '%s' is not true or false; ignored", value);
            else
                cfg->allow_insecure_paths = b;
        } else if (strcmp(name, "enable_control") == 0 || strcmp(name, "perf_map") == 0) {
            const int control = name[0] == 'e';
            if (!once(p, control ? K_CONTROL : K_PERFMAP, name)) return 1;
            int b = clrmux_parse_bool(value);
            if (b < 0)
                diag(cfg, CLRMUX_LOG_ERROR, p->line, "%s = '%s' is not true or false; ignored", name, value);
            else if (control)
                cfg->control_disabled = !b;
            else
                cfg->perf_map = b;
        } else {
            diag(cfg, CLRMUX_LOG_WARN, p->line, "unknown key '%s' in [loader]; ignored", name);
        }
        return 1;
    }
    struct clrmux_child_conf *c = p->child;
    if (strcmp(name, "path") == 0) {
        if (!once(p, K_PATH, name)) return 1;
        if (!value[0]) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: empty path", c->name);
            c->invalid = 1;
            return 1;
        }
        if (resolve_path(cfg, value, c->path, sizeof c->path) != 0) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: path too long; child skipped", c->name);
            c->invalid = 1;
        }
    } else if (strcmp(name, "clsid") == 0) {
        if (!once(p, K_CLSID, name)) return 1;
        if (clrmux_guid_parse(value, &c->clsid) != 0) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line,
                 "[child %s]: clsid '%s' is not a GUID of the form {XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}; child skipped",
                 c->name, value);
            c->invalid = 1;
        } else {
            c->has_clsid = 1;
        }
    } else if (strcmp(name, "enabled") == 0) {
        if (!once(p, K_ENABLED, name)) return 1;
        int b = clrmux_parse_bool(value);
        if (b < 0) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: enabled = '%s' is not true or false; child skipped", c->name, value);
            c->invalid = 1;
        } else {
            c->enabled = b;
        }
    } else if (strcmp(name, "builtin") == 0) {
        if (!once(p, K_BUILTIN, name)) return 1;
        if (strcmp(value, "tracer") != 0 && strcmp(value, "profiler") != 0) {
            diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: unknown builtin '%s' (expected tracer or profiler); child skipped", c->name, value);
            c->invalid = 1;
        } else {
            snprintf(c->builtin, sizeof c->builtin, "%s", value);
        }
    } else {
        /* other keys belong to builtin children; validated once the section is complete */
        if (c->nkvs >= CLRMUX_MAX_CHILD_KEYS || cfg->nkvs_total >= CLRMUX_MAX_KEYS) {
            if (!c->keys_dropped++)
                diag(cfg, CLRMUX_LOG_ERROR, p->line, "[child %s]: more than %d keys in this child or %d in the file; "
                     "this key and the child's later ones are ignored", c->name, CLRMUX_MAX_CHILD_KEYS, CLRMUX_MAX_KEYS);
            return 1;
        }
        struct clrmux_kv *kvs = realloc(c->kvs, (c->nkvs + 1) * sizeof *kvs);
        if (!kvs) return 1;
        c->kvs = kvs;
        kvs[c->nkvs].key = strdup(name);
        kvs[c->nkvs].value = strdup(value);
        kvs[c->nkvs].line = p->line;
        if (!kvs[c->nkvs].key || !kvs[c->nkvs].value) {
            free(kvs[c->nkvs].key);
            free(kvs[c->nkvs].value);
            return 1;
        }
        c->nkvs++;
        cfg->nkvs_total++;
    }
    return 1;
}

static void validate_children(struct clrmux_config *cfg)
{
    for (size_t i = 0; i < cfg->nchildren; i++) {
        struct clrmux_child_conf *c = &cfg->children[i];
        if (c->invalid) continue;
        if (c->builtin[0] && c->path[0]) {
            diag(cfg, CLRMUX_LOG_ERROR, c->line, "[child %s]: has both 'builtin' and 'path'; child skipped", c->name);
            c->invalid = 1;
        } else if (!c->builtin[0] && !c->path[0]) {
            diag(cfg, CLRMUX_LOG_ERROR, c->line, "[child %s]: needs 'path' (a profiler library) or 'builtin'; child skipped", c->name);
            c->invalid = 1;
        } else if (c->path[0] && !c->has_clsid) {
            diag(cfg, CLRMUX_LOG_ERROR, c->line, "[child %s]: needs 'clsid' (the CLSID its DllGetClassObject answers); child skipped", c->name);
            c->invalid = 1;
        }
        if (!c->builtin[0]) {
            for (size_t k = 0; k < c->nkvs; k++)
                diag(cfg, CLRMUX_LOG_WARN, c->kvs[k].line, "[child %s]: unknown key '%s'; ignored", c->name, c->kvs[k].key);
        }
    }
}

static void parse_text(const char *text, size_t len, struct clrmux_config *cfg)
{
    struct parser p;
    memset(&p, 0, sizeof p);
    p.cfg = cfg;
    p.pos = text;
    p.end = text + len;
    ini_parse_stream(reader, &p, handler, &p);
    check_previous_line(&p);
    validate_children(cfg);
    if (cfg->nchildren == 0)
        diag(cfg, CLRMUX_LOG_WARN, 0, "no [child NAME] section");
}

/* Clears every field before children[]: the entries of children[] and diags[] (most of the
 * structure) are cleared or written whole as they are taken, so start-up does not touch the
 * pages of entries no file uses. */
static void init_cfg(struct clrmux_config *cfg)
{
    memset(cfg, 0, offsetof(struct clrmux_config, children));
    cfg->log_level = -1;
}

static const char *file_kind(mode_t m)
{
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
         : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Reads a regular file of at most CLRMUX_CONFIG_MAX_BYTES into a NUL-terminated buffer
 * (caller frees). Never blocks on a FIFO, never reads a device. NULL with a diagnostic. */
static char *read_config_file(const char *path, struct clrmux_config *cfg, size_t *len)
{
    int fd = clrmux_open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0) {
        diag(cfg, CLRMUX_LOG_WARN, 0, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        diag(cfg, CLRMUX_LOG_ERROR, 0, "cannot read %s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        diag(cfg, CLRMUX_LOG_ERROR, 0, "%s is %s, not a regular file; not read", path, file_kind(st.st_mode));
    } else if ((unsigned long long)st.st_size > CLRMUX_CONFIG_MAX_BYTES) {
        diag(cfg, CLRMUX_LOG_ERROR, 0, "%s is %lld bytes, more than the %u bytes a configuration may have; not read",
             path, (long long)st.st_size, CLRMUX_CONFIG_MAX_BYTES);
    } else if (!(buf = malloc((size_t)st.st_size + 2))) {
        diag(cfg, CLRMUX_LOG_ERROR, 0, "cannot read %s: out of memory", path);
    } else {
        /* sized for the file as fstat saw it (a 4 MB buffer was an mmap and munmap at every
         * start-up), grown up to the limit if it grew meanwhile */
        size_t n = 0, cap = (size_t)st.st_size + 2;
        for (;;) { /* one byte more than the limit tells a file that grew while read */
            if (n + 1 >= cap && cap < CLRMUX_CONFIG_MAX_BYTES + 2) {
                size_t ncap = cap * 2 < CLRMUX_CONFIG_MAX_BYTES + 2 ? cap * 2 : CLRMUX_CONFIG_MAX_BYTES + 2;
                char *nb = realloc(buf, ncap);
                if (!nb) {
                    diag(cfg, CLRMUX_LOG_ERROR, 0, "cannot read %s: out of memory", path);
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = nb;
                cap = ncap;
            }
            ssize_t r = read(fd, buf + n, cap - 1 - n); /* cap - 1 <= the limit + 1 */
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0) {
                diag(cfg, CLRMUX_LOG_ERROR, 0, "cannot read %s: %s", path, strerror(errno));
                free(buf);
                buf = NULL;
                break;
            }
            n += (size_t)r;
            if (r == 0 || n > CLRMUX_CONFIG_MAX_BYTES)
                break;
        }
        if (buf && n > CLRMUX_CONFIG_MAX_BYTES) {
            diag(cfg, CLRMUX_LOG_ERROR, 0, "%s grew past %u bytes while being read; not read", path,
                 CLRMUX_CONFIG_MAX_BYTES);
            free(buf);
            buf = NULL;
        }
        if (buf) {
            buf[n] = 0;
            *len = n;
        }
    }
    close(fd);
    return buf;
}

static void parse_buffer(const char *text, size_t len, struct clrmux_config *cfg)
{
    cfg->found = 1;
    if (!len) { /* empty */
        validate_children(cfg);
        diag(cfg, CLRMUX_LOG_WARN, 0, "no [child NAME] section");
        return;
    }
    parse_text(text, len, cfg);
}

void clrmux_config_load(const char *path, struct clrmux_config *cfg)
{
    init_cfg(cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", path);
    snprintf(cfg->dir, sizeof cfg->dir, "%s", path);
    char *slash = clrmux_last_separator(cfg->dir);
    if (slash) *slash = 0;
    else snprintf(cfg->dir, sizeof cfg->dir, ".");
    size_t len = 0;
    char *text = read_config_file(path, cfg, &len);
    if (!text)
        return;
    parse_buffer(text, len, cfg);
    free(text);
    char real[PATH_MAX], why[PATH_MAX + 160];
    if (clrmux_path_trusted(path, real, sizeof real, why, sizeof why) == 0)
        return;
    if (cfg->allow_insecure_paths) {
        diag(cfg, CLRMUX_LOG_WARN, 0, "%s; used anyway (allow_insecure_paths = true)", why);
        return;
    }
    /* nothing of a file someone else could have written is used */
    char keep_path[PATH_MAX], keep_dir[PATH_MAX];
    memcpy(keep_path, cfg->path, sizeof keep_path);
    memcpy(keep_dir, cfg->dir, sizeof keep_dir);
    clrmux_config_free(cfg);
    memset(cfg->children, 0, cfg->nchildren * sizeof cfg->children[0]); /* nothing of it kept */
    init_cfg(cfg);
    memcpy(cfg->path, keep_path, sizeof keep_path);
    memcpy(cfg->dir, keep_dir, sizeof keep_dir);
    diag(cfg, CLRMUX_LOG_ERROR, 0, "refused: %s (a configuration must be owned by root or this process's user "
         "and writable only by its owner, as must each folder above it; allow_insecure_paths = true in [loader] "
         "overrides this)", why);
}

void clrmux_config_load_string(const char *text, const char *name, const char *dir,
                               struct clrmux_config *cfg)
{
    init_cfg(cfg);
    snprintf(cfg->path, sizeof cfg->path, "%s", name);
    snprintf(cfg->dir, sizeof cfg->dir, "%s", dir ? dir : "");
    cfg->found = 1;
    parse_text(text, strlen(text), cfg);
}

void clrmux_config_free(struct clrmux_config *cfg)
{
    for (size_t i = 0; i < cfg->nchildren; i++) {
        struct clrmux_child_conf *c = &cfg->children[i];
        for (size_t k = 0; k < c->nkvs; k++) {
            free(c->kvs[k].key);
            free(c->kvs[k].value);
        }
        free(c->kvs);
        c->kvs = NULL;
        c->nkvs = 0;
    }
}

size_t clrmux_config_active_children(const struct clrmux_config *cfg)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->nchildren; i++)
        n += !cfg->children[i].invalid && cfg->children[i].enabled;
    return n;
}

/* Whether `name` is one of the ';'/','-separated entries of `list` (".exe" ignored). */
static int list_has(const char *list, const char *name)
{
    if (!name || !*name) return 0;
    size_t nlen = strlen(name);
    if (nlen > 4 && strcasecmp(name + nlen - 4, ".exe") == 0) nlen -= 4;
    const char *p = list;
    while (*p) {
        while (*p == ';' || *p == ',' || isspace((unsigned char)*p)) p++;
        const char *e = p;
        while (*e && *e != ';' && *e != ',') e++;
        const char *end = e;
        while (end > p && isspace((unsigned char)end[-1])) end--;
        size_t len = (size_t)(end - p);
        if (len > 4 && strncasecmp(end - 4, ".exe", 4) == 0) len -= 4;
        if (len && len == nlen && strncmp(p, name, len) == 0) return 1;
        p = e;
    }
    return 0;
}

int clrmux_config_process_allowed(const struct clrmux_config *cfg, const char *exe,
                                  const char *app, const char **why)
{
    if (list_has(cfg->exclude_processes, exe) || list_has(cfg->exclude_processes, app)) {
        *why = "listed in exclude_processes";
        return 0;
    }
    int has_include = 0;
    for (const char *p = cfg->include_processes; *p; p++)
        if (!isspace((unsigned char)*p) && *p != ';' && *p != ',') has_include = 1;
    if (has_include && !list_has(cfg->include_processes, exe) && !list_has(cfg->include_processes, app)) {
        *why = "not listed in include_processes";
        return 0;
    }
    *why = has_include ? "listed in include_processes" : "no process filter excludes it";
    return 1;
}
