/* bench/sink.c: a local OTLP/HTTP sink for bench/spans.sh: accepts HTTP/1.1 POSTs on
 * 127.0.0.1 (a free port, written to PORTFILE), reads each request's body (Content-Length)
 * and answers 200 with an empty body, keeping the connection open; counts requests and body
 * bytes (printed to stdout when it gets SIGTERM). One thread, poll(2), up to 64 connections:
 * the exporter under test does the encoding and the sending, the sink only reads. Exits
 * after LIFETIME seconds whatever happens. Not part of clrmux.
 *
 * Usage: sink PORTFILE [LIFETIME]   (default 300 s) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 64
struct conn {
    int fd;
    char hdr[8192];
    size_t hlen;
    size_t body_left; /* bytes of the current body still to read */
    int in_body;
};

static volatile sig_atomic_t stop;
static void on_term(int sig) { (void)sig, stop = 1; }

static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n";

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int lifetime = argc > 2 ? atoi(argv[2]) : 300;
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, 64) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) != 0) {
        perror("sink");
        return 1;
    }
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
    FILE *pf = fopen(tmp, "w");
    if (!pf)
        return 1;
    fprintf(pf, "%d\n", ntohs(a.sin_port));
    fclose(pf);
    rename(tmp, argv[1]);
    struct conn c[MAXC];
    int nc = 0;
    unsigned long long requests = 0, bytes = 0;
    time_t end = time(NULL) + lifetime;
    static char buf[1 << 16];
    while (!stop && time(NULL) < end) {
        struct pollfd p[MAXC + 1];
        p[0] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (int i = 0; i < nc; i++)
            p[i + 1] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        if (poll(p, (nfds_t)nc + 1, 500) <= 0)
            continue;
        if ((p[0].revents & POLLIN) && nc < MAXC) {
            int fd = accept(ls, NULL, NULL);
            if (fd >= 0) {
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                c[nc++] = (struct conn){.fd = fd};
            }
        }
        for (int i = nc - 1; i >= 0; i--) {
            if (!(p[i + 1].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            struct conn *k = &c[i];
            ssize_t n = read(k->fd, buf, sizeof buf);
            if (n <= 0) {
                close(k->fd);
                c[i] = c[--nc];
                continue;
            }
            size_t off = 0;
            while (off < (size_t)n) {
                if (k->in_body) {
                    size_t take = (size_t)n - off < k->body_left ? (size_t)n - off : k->body_left;
                    k->body_left -= take;
                    off += take;
                    bytes += take;
                    if (!k->body_left) {
                        k->in_body = 0;
                        requests++;
                        if (write(k->fd, reply, sizeof reply - 1) < 0)
                            break;
                    }
                    continue;
                }
                /* headers: up to the blank line */
                while (off < (size_t)n && k->hlen < sizeof k->hdr - 1) {
                    k->hdr[k->hlen++] = buf[off++];
                    if (k->hlen >= 4 && memcmp(k->hdr + k->hlen - 4, "\r\n\r\n", 4) == 0)
                        break;
                }
                k->hdr[k->hlen] = 0;
                if (k->hlen >= 4 && memcmp(k->hdr + k->hlen - 4, "\r\n\r\n", 4) == 0) {
                    size_t len = 0;
                    for (char *h = k->hdr; (h = strchr(h, '\n')) != NULL; h++)
                        if (strncasecmp(h + 1, "content-length:", 15) == 0)
                            len = strtoul(h + 16, NULL, 10);
                    k->hlen = 0;
                    k->in_body = 1;
                    k->body_left = len;
                    if (!len) {
                        k->in_body = 0;
                        requests++;
                        if (write(k->fd, reply, sizeof reply - 1) < 0)
                            break;
                    }
                } else if (k->hlen >= sizeof k->hdr - 1) {
                    k->hlen = 0; /* not HTTP: dropped */
                }
            }
        }
    }
    printf("requests=%llu bytes=%llu\n", requests, bytes);
    return 0;
}
