/* The fan-out benchmark's subscribers, compiled: read WebSocket frames from many sockets
 * with epoll and time each stamped event, as `cluster_common._raw_clients` does in Python,
 * at a fraction of the CPU (the subscribers share the machine's two cores with the server).
 *
 * The handshake and `watch` messages are done in Python; this takes the connected,
 * non-blocking sockets once every subscriber is synced and reads until *stop is set.
 * Built by cluster_common.c_reader() with the system's C compiler.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char MARK[] = "\"bench.agentwatch/stamp\":\"";

typedef struct {
    int fd;
    unsigned char *buf;
    size_t len, cap;
    int64_t expected, missing, dups, count, others;
    int close_code, open;
} sub_t;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t socket_ns(struct msghdr *msg) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
            struct timespec ts;
            memcpy(&ts, CMSG_DATA(c), sizeof ts);
            return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
        }
    }
    return 0;
}

/* A stamped text message: `seq:emitted_ns` after MARK. Returns 1 and fills them if found. */
static int parse_stamp(const unsigned char *p, size_t n, int64_t *seq, int64_t *emitted) {
    const unsigned char *m = memmem(p, n, MARK, sizeof MARK - 1);
    if (!m) return 0;
    const unsigned char *q = m + sizeof MARK - 1, *end = p + n;
    int64_t a = 0, b = 0;
    while (q < end && *q >= '0' && *q <= '9') a = a * 10 + (*q++ - '0');
    if (q >= end || *q != ':') return 0;
    q++;
    while (q < end && *q >= '0' && *q <= '9') b = b * 10 + (*q++ - '0');
    *seq = a;
    *emitted = b;
    return 1;
}

/* Reads until *stop. Per subscriber i, up to `max_events` latencies (microseconds) go to
 * lat[i * max_events ...] (read time) and lat_sock[...] (the kernel's receive timestamp,
 * when `socket_time`); counters go to stats[i * 6 ...]: count, expected next sequence
 * number, missing, duplicated or reordered, other messages, close code (0: open).
 * Returns the number of reads, or -errno if epoll could not be set up. */
long read_loop(int n, const int *fds, const int64_t *first_seq, volatile int *stop,
               int max_events, int socket_time, int64_t *lat, int64_t *lat_sock,
               int64_t *stats, int64_t *busy_ns) {
    int ep = epoll_create1(0);
    if (ep < 0) return -errno;
    sub_t *subs = calloc((size_t)n, sizeof *subs);
    for (int i = 0; i < n; i++) {
        subs[i].fd = fds[i];
        subs[i].cap = 1 << 20;
        subs[i].buf = malloc(subs[i].cap);
        subs[i].expected = first_seq[i];
        subs[i].open = 1;
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev);
    }
    struct epoll_event evs[256];
    char control[CMSG_SPACE(sizeof(struct timespec))];
    long reads = 0;
    *busy_ns = 0;
    while (!*stop) {
        int k = epoll_wait(ep, evs, 256, 50);
        int64_t t_busy = now_ns();
        for (int e = 0; e < k; e++) {
            sub_t *s = &subs[evs[e].data.u32];
            if (s->cap - s->len < 262144) {
                s->cap *= 2;
                s->buf = realloc(s->buf, s->cap);
            }
            struct iovec iov = {.iov_base = s->buf + s->len, .iov_len = s->cap - s->len};
            struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
            if (socket_time) {
                msg.msg_control = control;
                msg.msg_controllen = sizeof control;
            }
            ssize_t got = recvmsg(s->fd, &msg, MSG_DONTWAIT);
            if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            int64_t t = now_ns();
            if (got <= 0) {
                epoll_ctl(ep, EPOLL_CTL_DEL, s->fd, NULL);
                if (!s->close_code) s->close_code = 1006;
                s->open = 0;
                continue;
            }
            reads++;
            int64_t t_sock = socket_time ? socket_ns(&msg) : 0;
            s->len += (size_t)got;
            size_t pos = 0;
            while (s->len - pos >= 2) {
                unsigned char *f = s->buf + pos;
                int opcode = f[0] & 0x0F;
                uint64_t plen = f[1] & 0x7F;
                size_t head = 2;
                if (plen == 126) {
                    if (s->len - pos < 4) break;
                    plen = ((uint64_t)f[2] << 8) | f[3];
                    head = 4;
                } else if (plen == 127) {
                    if (s->len - pos < 10) break;
                    plen = 0;
                    for (int b = 0; b < 8; b++) plen = (plen << 8) | f[2 + b];
                    head = 10;
                }
                if (s->len - pos < head + plen) break;
                unsigned char *p = f + head;
                int64_t seq, emitted;
                if (opcode == 0x1 && parse_stamp(p, plen, &seq, &emitted)) {
                    if (seq == s->expected) s->expected++;
                    else if (seq > s->expected) {
                        s->missing += seq - s->expected;
                        s->expected = seq + 1;
                    } else s->dups++;
                    if (s->count < max_events) {
                        size_t at = (size_t)(s - subs) * (size_t)max_events + (size_t)s->count;
                        lat[at] = (t - emitted) / 1000;
                        if (socket_time) lat_sock[at] = (t_sock - emitted) / 1000;
                    }
                    s->count++;
                } else if (opcode == 0x8) {
                    s->close_code = plen >= 2 ? (p[0] << 8) | p[1] : 1005;
                } else if (opcode == 0x9 && plen < 126) {
                    /* Pong with the same payload; a zero mask key leaves it as is. */
                    unsigned char pong[2 + 4 + 125] = {0x8A, (unsigned char)(0x80 | plen)};
                    memcpy(pong + 6, p, plen);
                    (void)send(s->fd, pong, 6 + plen, MSG_DONTWAIT | MSG_NOSIGNAL);
                } else if (opcode == 0x1) {
                    s->others++;
                }
                pos += head + plen;
            }
            if (pos) {
                memmove(s->buf, s->buf + pos, s->len - pos);
                s->len -= pos;
            }
        }
        if (k > 0) *busy_ns += now_ns() - t_busy;
    }
    for (int i = 0; i < n; i++) {
        int64_t *st = stats + (size_t)i * 6;
        st[0] = subs[i].count;
        st[1] = subs[i].expected;
        st[2] = subs[i].missing;
        st[3] = subs[i].dups;
        st[4] = subs[i].others;
        st[5] = subs[i].close_code;
        free(subs[i].buf);
    }
    free(subs);
    close(ep);
    return reads;
}
