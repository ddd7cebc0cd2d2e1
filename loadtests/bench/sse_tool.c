/* A server-sent-events backend and client for the activator's SSE benchmark.
 *
 * Python tools saturate before the proxy they measure does, so both ends of
 * the SSE benchmark are this one small epoll program (built with gcc from
 * Debian by loadtests/bench/activator_harness.py):
 *
 *   sse_tool serve PORT RATE EVENTS
 *       Answers every request on a connection with a chunked
 *       text/event-stream of EVENTS events, RATE per second. Streams are
 *       phase-shifted so that the events of 200 streams are spread over each
 *       period, not sent in one burst. Each event carries its send time on
 *       CLOCK_MONOTONIC (which every process on the machine shares). On
 *       SIGTERM it prints one JSON line: events sent and how late against
 *       their schedule it sent them (its own slip, to show it kept up).
 *
 *   sse_tool load PORT STREAMS TIMEOUT_S
 *       Opens STREAMS connections, asks each for /v1/stream, and for every
 *       event takes its arrival time minus its send time. Prints one JSON
 *       line: streams completed, events, lateness p50/p90/p99/max in ms.
 *
 * It speaks just enough HTTP/1.1 for this: requests end at the blank line
 * (no bodies); the client finds events by their "data: " prefix, which chunk
 * framing (hex sizes and CRLFs) cannot contain.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define MAXCONN 4096

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct_ms(int64_t *v, long n, double q) {
    if (n == 0) return -1;
    long i = (long)(q / 100.0 * n);
    if (i >= n) i = n - 1;
    return v[i] / 1e6;
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- serve ------------------------------------------------------------------ */

struct stream {
    int fd;
    int active;     /* a request was read and its stream is running */
    int sent;
    int64_t due;    /* next event's scheduled time */
    char req[1024];
    int reqlen;
};

static volatile sig_atomic_t stop_flag = 0;
static void on_term(int sig) { (void)sig; stop_flag = 1; }

static int serve(int port, int rate, int events) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                            .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 4096)) {
        perror("bind/listen");
        return 1;
    }
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = -1};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static struct stream s[MAXCONN];
    int64_t period = 1000000000LL / rate;
    long sent_total = 0, active = 0;
    int maxfd = 0;
    int64_t *slip = malloc(sizeof(int64_t) * 4000000);
    long nslip = 0;
    struct epoll_event evs[256];
    while (!stop_flag) {
        /* the earliest due event bounds the wait */
        /* millisecond ticks: events due within one go out together, so the
           server sleeps between ticks instead of spinning on its core */
        int64_t now = now_ns(), next = now + 100000000LL;
        for (int fd = 0; fd <= maxfd; fd++)
            if (s[fd].active && s[fd].due < next) next = s[fd].due;
        int wait_ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
        int n = epoll_wait(ep, evs, 256, wait_ms);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == -1) {
                int c;
                while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (c >= MAXCONN) { close(c); continue; }
                    if (c > maxfd) maxfd = c;
                    nodelay(c);
                    memset(&s[c], 0, sizeof s[c]);
                    s[c].fd = c;
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            struct stream *st = &s[fd];
            int r = read(fd, st->req + st->reqlen, sizeof st->req - 1 - st->reqlen);
            if (r <= 0) {
                if (st->active) active--;
                st->active = 0;
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                continue;
            }
            st->reqlen += r;
            st->req[st->reqlen] = 0;
            if (!st->active && strstr(st->req, "\r\n\r\n")) {
                static const char head[] =
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
                if (write(fd, head, sizeof head - 1) < 0) continue;
                st->active = 1;
                st->sent = 0;
                st->reqlen = 0;
                /* phase: spread the streams evenly over one period */
                st->due = now_ns() + (period * (active % 200)) / 200;
                active++;
            }
        }
        now = now_ns();
        for (int fd = 0; fd <= maxfd; fd++) {
            struct stream *st = &s[fd];
            if (!st->active || st->due > now) continue;
            char body[64], out[96];
            int64_t t = now_ns();
            int bl = snprintf(body, sizeof body, "data: %lld\n\n", (long long)t);
            int ol = snprintf(out, sizeof out, "%x\r\n%s\r\n", bl, body);
            if (st->sent + 1 == events) {
                memcpy(out + ol, "0\r\n\r\n", 5);
                ol += 5;
            }
            if (write(fd, out, ol) != ol) {
                st->active = 0;
                active--;
                continue;
            }
            if (nslip < 4000000) slip[nslip++] = t - st->due;
            sent_total++;
            st->due += period;
            if (++st->sent == events) { st->active = 0; active--; }
        }
    }
    qsort(slip, nslip, sizeof *slip, cmp_i64);
    printf("{\"sent\": %ld, \"slip_p50_ms\": %.3f, \"slip_p99_ms\": %.3f}\n", sent_total,
           pct_ms(slip, nslip, 50), pct_ms(slip, nslip, 99));
    return 0;
}

/* ---- load ------------------------------------------------------------------- */

struct reader {
    char buf[8192];
    int len;
    int done;
};

static int load(int port, int streams, int timeout_s) {
    int ep = epoll_create1(0);
    static struct reader rd[MAXCONN];
    long cap = 40000000, nlat = 0;
    int64_t *lat = malloc(sizeof(int64_t) * cap);
    int open_streams = 0, completed = 0;
    static const char req[] =
        "GET /v1/stream HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n";
    for (int i = 0; i < streams; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port),
                                .sin_addr.s_addr = htonl(0x7f000001)};
        if (fd >= MAXCONN || connect(fd, (struct sockaddr *)&a, sizeof a)) {
            perror("connect");
            return 1;
        }
        nodelay(fd);
        if (write(fd, req, sizeof req - 1) != sizeof req - 1) return 1;
        fcntl(fd, F_SETFL, O_NONBLOCK);
        memset(&rd[fd], 0, sizeof rd[fd]);
        struct epoll_event e = {.events = EPOLLIN, .data.fd = fd};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
        open_streams++;
    }
    int64_t deadline = now_ns() + (int64_t)timeout_s * 1000000000LL;
    struct epoll_event evs[256];
    while (open_streams > 0 && now_ns() < deadline) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            struct reader *r = &rd[fd];
            int got = read(fd, r->buf + r->len, sizeof r->buf - 1 - r->len);
            int64_t t = now_ns();
            if (got <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                open_streams--;
                continue;
            }
            r->len += got;
            r->buf[r->len] = 0;
            if (strstr(r->buf, "\r\n0\r\n\r\n")) r->done = 1;
            char *p = r->buf, *keep;
            for (;;) {
                char *d = strstr(p, "data: "), *e;
                if (d == NULL) {
                    /* keep a tail that may hold a split "data: " or end marker */
                    keep = r->len > 16 ? r->buf + r->len - 16 : r->buf;
                    if (keep < p) keep = p;
                    break;
                }
                if ((e = strstr(d, "\n\n")) == NULL) { keep = d; break; }
                if (nlat < cap) lat[nlat++] = t - atoll(d + 6);
                p = e + 2;
            }
            if (r->done) {
                completed++;
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
                open_streams--;
                continue;
            }
            r->len -= (int)(keep - r->buf);
            memmove(r->buf, keep, r->len);
        }
    }
    qsort(lat, nlat, sizeof *lat, cmp_i64);
    printf("{\"streams\": %d, \"completed\": %d, \"events\": %ld, \"p50_ms\": %.3f, "
           "\"p90_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}\n",
           streams, completed, nlat, pct_ms(lat, nlat, 50), pct_ms(lat, nlat, 90),
           pct_ms(lat, nlat, 99), pct_ms(lat, nlat, 100));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "serve"))
        return serve(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    if (argc == 5 && !strcmp(argv[1], "load"))
        return load(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    fprintf(stderr, "usage: sse_tool serve PORT RATE EVENTS | load PORT STREAMS TIMEOUT_S\n");
    return 2;
}
