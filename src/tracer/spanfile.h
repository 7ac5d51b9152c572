/* The tracer's output file: OTLP JSON lines appended with one write(2) per line, opened so
 * that no one else's file is ever written, with a size cap and rotation.
 *
 * Opening (clrmux_spanfile_open and each rotation): O_NOFOLLOW (a planted symbolic link is
 * refused, never followed), O_NONBLOCK during open (a planted FIFO cannot block it), then
 * fstat: only a regular file, owned by the process's effective user, with one link (a
 * planted hard link to another file is refused), or a character device such as /dev/null
 * (which only a privileged user can create; never capped or rotated); created with mode 0640
 * (less the umask), as the log is: spans can hold exception messages.
 * A file that does not end in '\n' (a writer killed mid-line) gets a '\n' first, so that the
 * lines written here start on a line of their own.
 *
 * Writing: each line is given whole and written with one write(2) call (a short write is
 * completed with further calls). Between two writers' lines nothing interleaves (O_APPEND),
 * and a process that dies between two calls leaves only whole lines. On Linux the blocks of a
 * regular file are reserved 2 MB ahead of the writes (fallocate with FALLOC_FL_KEEP_SIZE: its
 * size stays that of the lines written; never past the cap): the file system's per-block work
 * leaves the writes. A file holds at most those 2 MB past its end on disk until it is deleted.
 *
 * Cap and rotation: with max_bytes > 0, a line that would take the file past max_bytes
 * first rotates it: path.(N-2) -> path.(N-1), ..., path -> path.1 (N = max_files, the number
 * of files kept, the current one included); the oldest, path.(N-1), is deleted (Linux: its
 * name at once, the freeing of its pages by a short detached thread: spanfile.c), and the
 * spans it held are counted as dropped (known for files this process wrote; a file left by
 * an earlier process counts as a deleted file only). With max_files = 1 the file is emptied
 * instead. A single line longer than max_bytes is still written, alone in its file. */
#ifndef CLRMUX_TRACER_SPANFILE_H
#define CLRMUX_TRACER_SPANFILE_H

#include <stddef.h>
#include <stdint.h>

#define CLRMUX_SPANFILE_MAX_FILES 100

struct clrmux_spanfile_stats {
    uint64_t lines, spans, bytes;       /* written by this process, all files */
    uint64_t rotations;                 /* times the current file was rotated */
    uint64_t files_deleted;             /* oldest files deleted (or emptied) by rotation */
    uint64_t spans_dropped;             /* spans in those files (see above) */
};

struct clrmux_spanfile;

/* Opens (creates) `path` for appending. max_bytes: the cap (0: none); max_files: files kept
 * (1..CLRMUX_SPANFILE_MAX_FILES). Returns the file, or NULL with errno set and the reason in
 * err[errsz], without the path ("it is a symbolic link (not followed)", "it is not a regular
 * file", "it is owned by uid N, ...", "No such file or directory"). */
struct clrmux_spanfile *clrmux_spanfile_open(const char *path, uint64_t max_bytes, unsigned max_files, char *err,
                                             size_t errsz);

/* Appends line[0..len) (the caller ends it with '\n'), which holds `nspans` spans, rotating
 * first when the cap requires it. Returns 0; 1 when the line was written but the rotation
 * before it failed (the current file was emptied instead, its spans counted as dropped;
 * the reason in err[errsz]); -1 when the line could not be written (errno set, reason in
 * err). */
int clrmux_spanfile_write(struct clrmux_spanfile *f, const char *line, size_t len, size_t nspans, char *err,
                          size_t errsz);

void clrmux_spanfile_stats(const struct clrmux_spanfile *f, struct clrmux_spanfile_stats *out);

/* Closes and frees f (NULL is fine). */
void clrmux_spanfile_close(struct clrmux_spanfile *f);

#endif
