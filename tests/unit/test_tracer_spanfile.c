/* The tracer's output file (src/tracer/spanfile.c): planted links and special files refused,
 * whole lines, the size cap with rotation and its drop counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(_WIN32)
#include <dirent.h>
#endif

#include <cmocka.h>

#include "tracer/spanfile.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "%s/clrmux-spanfile.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
#if defined(_WIN32) /* Wine: no rm; the folder holds files only */
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove(p);
        }
    if (d)
        closedir(d);
    return rmdir(dir);
#endif
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void pathof(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static long file_size(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

static char *slurp(const char *p)
{
    FILE *f = fopen(p, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void test_refuses_planted_files(void **state)
{
    (void)state;
    char target[300], sym[300], fifo[300], hard[300], err[512];
    pathof(target, sizeof target, "victim");
    FILE *v = fopen(target, "wb");
    fputs("precious\n", v);
    fclose(v);
#if defined(_WIN32)
    /* Windows: no symlink(2), mkfifo(3) or link(2) here (reparse points are refused by
     * clrmux_open: tests/win/test_platform.c); a directory is refused */
    (void)sym, (void)fifo, (void)hard;
    assert_null(clrmux_spanfile_open(dir, 0, 1, err, sizeof err));
    assert_string_equal(slurp(target), "precious\n");
#else
    /* a symbolic link to another file: refused, the target untouched */
    pathof(sym, sizeof sym, "traces.jsonl");
    assert_int_equal(symlink(target, sym), 0);
    assert_null(clrmux_spanfile_open(sym, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "is a symbolic link"));
    assert_string_equal(slurp(target), "precious\n");
    /* a dangling link (would create a file elsewhere): refused, nothing created */
    char dangling[300], nowhere[300];
    pathof(dangling, sizeof dangling, "dangling.jsonl");
    pathof(nowhere, sizeof nowhere, "created-through-link");
    assert_int_equal(symlink(nowhere, dangling), 0);
    assert_null(clrmux_spanfile_open(dangling, 0, 1, err, sizeof err));
    assert_int_equal(access(nowhere, F_OK), -1);
    /* a FIFO: refused at once, no blocking open */
    pathof(fifo, sizeof fifo, "fifo.jsonl");
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_null(clrmux_spanfile_open(fifo, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "not a regular file"));
    /* a directory */
    assert_null(clrmux_spanfile_open(dir, 0, 1, err, sizeof err));
    /* a hard link to another file */
    pathof(hard, sizeof hard, "hard.jsonl");
    assert_int_equal(link(target, hard), 0);
    assert_null(clrmux_spanfile_open(hard, 0, 1, err, sizeof err));
    assert_non_null(strstr(err, "hard links"));
    assert_string_equal(slurp(target), "precious\n");
    /* /dev/null: accepted, never rotated (a rename of /dev/null would be a disaster) */
    struct clrmux_spanfile *f = clrmux_spanfile_open("/dev/null", 10, 2, err, sizeof err);
    assert_non_null(f);
    for (int i = 0; i < 5; i++)
        assert_int_equal(clrmux_spanfile_write(f, "{\"x\":12345}\n", 12, 1, err, sizeof err), 0);
    struct clrmux_spanfile_stats st;
    clrmux_spanfile_stats(f, &st);
    assert_int_equal(st.rotations, 0);
    clrmux_spanfile_close(f);
    assert_int_equal(access("/dev/null.1", F_OK), -1);
#endif
}

static void test_whole_lines_and_mode(void **state)
{
    (void)state;
    char p[300], err[512];
    pathof(p, sizeof p, "lines.jsonl");
    FILE *torn = fopen(p, "wb"); /* what a writer killed mid-line left */
    fputs("{\"a\":1}\n{\"b\":", torn);
    fclose(torn);
    struct clrmux_spanfile *f = clrmux_spanfile_open(p, 0, 1, err, sizeof err);
    assert_non_null(f);
    assert_int_equal(clrmux_spanfile_write(f, "{\"c\":3}\n", 8, 1, err, sizeof err), 0);
    assert_int_equal(clrmux_spanfile_write(f, "{\"d\":4}\n", 8, 2, err, sizeof err), 0);
    struct clrmux_spanfile_stats st;
    clrmux_spanfile_stats(f, &st);
    assert_int_equal(st.lines, 2);
    assert_int_equal(st.spans, 3);
    clrmux_spanfile_close(f);
    assert_string_equal(slurp(p), "{\"a\":1}\n{\"b\":\n{\"c\":3}\n{\"d\":4}\n");
#if !defined(_WIN32) /* Windows: the new file's access comes from its folder's ACL */
    char fresh[300];
    pathof(fresh, sizeof fresh, "fresh.jsonl");
    mode_t old = umask(022);
    f = clrmux_spanfile_open(fresh, 0, 1, err, sizeof err);
    umask(old);
    assert_non_null(f);
    clrmux_spanfile_close(f);
    struct stat sb;
    assert_int_equal(stat(fresh, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0640);
#endif
}

/* 300-byte lines of 10 spans, a 1000-byte cap, 3 files kept: every file holds 3 whole lines
 * at most, only path, path.1 and path.2 remain, and the spans of the deleted files are
 * counted. */
static void test_rotation(void **state)
{
    (void)state;
    char p[300], err[512], name[320];
    pathof(p, sizeof p, "rot.jsonl");
    struct clrmux_spanfile *f = clrmux_spanfile_open(p, 1000, 3, err, sizeof err);
    assert_non_null(f);
    char line[300];
    memset(line, 'x', sizeof line);
    line[0] = '{', line[298] = '}', line[299] = '\n';
    for (int i = 0; i < 20; i++)
        assert_int_equal(clrmux_spanfile_write(f, line, sizeof line, 10, err, sizeof err), 0);
    struct clrmux_spanfile_stats st;
    clrmux_spanfile_stats(f, &st);
    clrmux_spanfile_close(f);
    long kept = 0;
    for (int i = 0; i < 3; i++) {
        if (i)
            snprintf(name, sizeof name, "%s.%d", p, i);
        else
            snprintf(name, sizeof name, "%s", p);
        long sz = file_size(name);
        assert_true(sz > 0 && sz <= 1000 && sz % 300 == 0);
        kept += sz / 300;
    }
    snprintf(name, sizeof name, "%s.3", p);
    assert_int_equal(file_size(name), -1);
    assert_int_equal(st.lines, 20);
    assert_int_equal(st.spans, 200);
    assert_int_equal(kept, 3 + 3 + 2);            /* 20 lines: 3 per file, the last has 2 */
    assert_int_equal(st.rotations, 6);            /* after lines 3, 6, ..., 18 */
    assert_int_equal(st.files_deleted, 4);        /* the first 4 rotations' oldest files */
    assert_int_equal(st.spans_dropped, 200 - 10 * kept);
}

static void test_rotation_one_file_and_oversize(void **state)
{
    (void)state;
    char p[300], err[512];
    pathof(p, sizeof p, "one.jsonl");
    struct clrmux_spanfile *f = clrmux_spanfile_open(p, 100, 1, err, sizeof err);
    assert_non_null(f);
    assert_int_equal(clrmux_spanfile_write(f, "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":1}\n", 63, 4, err,
                                           sizeof err), 0);
    assert_int_equal(clrmux_spanfile_write(f, "{\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\":2}\n", 63, 5, err,
                                           sizeof err), 0);
    static char big[400];
    memset(big, 'z', sizeof big);
    big[sizeof big - 1] = '\n';
    assert_int_equal(clrmux_spanfile_write(f, big, sizeof big, 7, err, sizeof err), 0); /* alone in its file */
    struct clrmux_spanfile_stats st;
    clrmux_spanfile_stats(f, &st);
    clrmux_spanfile_close(f);
    assert_int_equal(file_size(p), (long)sizeof big);
    assert_int_equal(st.files_deleted, 2);
    assert_int_equal(st.spans_dropped, 9);
}

#if !defined(_WIN32)
/* The oldest file deleted at rotation is a planted symbolic link: the link goes (counted as a
 * deleted file), what it points to is neither opened nor changed (spanfile.c deletes the name
 * and frees the pages of what it held on a thread of its own). */
static void test_rotation_planted_link_oldest(void **state)
{
    (void)state;
    char p[300], old[320], target[300], err[512];
    pathof(p, sizeof p, "link.jsonl");
    pathof(target, sizeof target, "theirs");
    snprintf(old, sizeof old, "%s.2", p);
    FILE *t = fopen(target, "w");
    assert_non_null(t);
    fputs("not yours\n", t);
    fclose(t);
    assert_int_equal(symlink(target, old), 0);
    struct clrmux_spanfile *f = clrmux_spanfile_open(p, 100, 3, err, sizeof err);
    assert_non_null(f);
    static char line[80];
    memset(line, 'x', sizeof line);
    line[sizeof line - 1] = '\n';
    for (int i = 0; i < 4; i++) /* rotations before lines 2, 3, 4: the first deletes the link */
        assert_int_equal(clrmux_spanfile_write(f, line, sizeof line, 1, err, sizeof err), 0);
    struct clrmux_spanfile_stats st;
    clrmux_spanfile_stats(f, &st);
    clrmux_spanfile_close(f);
    struct stat ls;
    assert_int_equal(lstat(old, &ls), 0);
    assert_true(S_ISREG(ls.st_mode)); /* path.1 moved there: the link is gone */
    assert_string_equal(slurp(target), "not yours\n");
    assert_int_equal(st.rotations, 3);
    assert_int_equal(st.files_deleted, 2); /* the link, then the first line's file */
    assert_int_equal(st.spans_dropped, 1);
}
#endif

#if defined(__linux__)
#include <fcntl.h>
/* Blocks are reserved ahead of the writes (fallocate, FALLOC_FL_KEEP_SIZE): the file's size is
 * what was written, its blocks go 2 MB past it, and never past the cap. */
static void test_blocks_reserved_ahead(void **state)
{
    (void)state;
    char p[300], q[300], probe[300], err[512];
    pathof(probe, sizeof probe, "probe");
    int fd = open(probe, O_RDWR | O_CREAT, 0600);
    assert_true(fd >= 0);
    int supported = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 4096) == 0;
    close(fd);
    if (!supported) {
        print_message("the file system of %s has no fallocate: skipped\n", dir);
        skip();
    }
    static char line[1001];
    memset(line, 'x', 1000);
    line[1000] = '\n';
    pathof(p, sizeof p, "spans.jsonl");
    struct clrmux_spanfile *f = clrmux_spanfile_open(p, 0, 1, err, sizeof err);
    assert_non_null(f);
    assert_int_equal(clrmux_spanfile_write(f, line, sizeof line, 1, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, sizeof line);
    assert_true((long long)st.st_blocks * 512 >= (2 << 20));
    clrmux_spanfile_close(f);
    /* with a cap of 64 KB: reserved up to the cap, no further */
    pathof(q, sizeof q, "capped.jsonl");
    f = clrmux_spanfile_open(q, 64 * 1024, 2, err, sizeof err);
    assert_non_null(f);
    assert_int_equal(clrmux_spanfile_write(f, line, sizeof line, 1, err, sizeof err), 0);
    assert_int_equal(stat(q, &st), 0);
    assert_int_equal(st.st_size, sizeof line);
    assert_true((long long)st.st_blocks * 512 >= 60 * 1024 && (long long)st.st_blocks * 512 <= 68 * 1024);
    clrmux_spanfile_close(f);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_refuses_planted_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whole_lines_and_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_one_file_and_oversize, setup, teardown),
#if !defined(_WIN32)
        cmocka_unit_test_setup_teardown(test_rotation_planted_link_oldest, setup, teardown),
#endif
#if defined(__linux__)
        cmocka_unit_test_setup_teardown(test_blocks_reserved_ahead, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
