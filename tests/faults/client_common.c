/*
 * client_common.c: what the fault suite's client programs share
 * (client_common.h says what each function does).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/faults/client_common.h"

volatile sig_atomic_t cc_stop;

static int cc_log_fd = -1;          /* the event log, O_APPEND */
static uint64_t cc_rng;             /* xorshift64 state */

static void
cc_term_cb(int sig)
{
    (void)sig;
    cc_stop = 1;
}

int
cc_start(const char *prog, const char *log_path)
{
    struct sigaction sa;

    cc_log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (cc_log_fd < 0) {
        fprintf(stderr, "%s: %s: %s\n", prog, log_path, strerror(errno));
        return CC_EXIT_LOG;
    }
    cc_rng = (uint64_t)cc_now_us() * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
    cc_rng |= 1;
    /* No SA_RESTART: a SIGTERM must interrupt a blocked read or a pause. */
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = cc_term_cb;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return 0;
}

int64_t
cc_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long
cc_random(long lo, long hi)
{
    cc_rng ^= cc_rng << 13;
    cc_rng ^= cc_rng >> 7;
    cc_rng ^= cc_rng << 17;
    return hi <= lo ? lo : lo + (long)(cc_rng % (uint64_t)(hi - lo + 1));
}

bool
cc_sleep_ms(long ms, bool stop_aborts)
{
    struct timespec ts;

    if (ms <= 0) {
        return !(stop_aborts && cc_stop);
    }
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        if (stop_aborts && cc_stop) {
            return false;
        }
    }
    return !(stop_aborts && cc_stop);
}

void
cc_log(const char *fmt, ...)
{
    char line[CC_LINE_MAX + 256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return;
    }
    if ((size_t)n > sizeof(line) - 2) {
        n = (int)sizeof(line) - 2;
    }
    line[n++] = '\n';
    if (write(cc_log_fd, line, (size_t)n) != n) {
        _exit(CC_EXIT_LOG);
    }
}

void
cc_printable(const char *in, char *out, size_t size)
{
    size_t i;

    for (i = 0; in[i] != '\0' && i + 1 < size; i++) {
        out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
    }
    out[i] = '\0';
}

long
cc_number(const char *s, void (*usage)(void))
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0) {
        usage();
    }
    return v;
}

/* One entry of a -p list into addr and *port (cc_daemon_list). */
static void
cc_daemon(const char *entry, char *addr, int *port, void (*usage)(void))
{
    const char *colon = strrchr(entry, ':');

    if (colon == NULL) {
        *port = (int)cc_number(entry, usage);
        snprintf(addr, CC_ADDR_MAX, "127.0.0.1:%d", *port);
        return;
    }
    if (colon == entry || strlen(entry) >= CC_ADDR_MAX) {
        usage();
    }
    *port = (int)cc_number(colon + 1, usage);
    memcpy(addr, entry, strlen(entry) + 1);
}

size_t
cc_daemon_list(char *list, char (*addrs)[CC_ADDR_MAX], int *ports, size_t n, size_t max,
               void (*usage)(void))
{
    char *tok, *save;

    for (tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (n == max) {
            usage();
        }
        cc_daemon(tok, addrs[n], &ports[n], usage);
        n++;
    }
    return n;
}
