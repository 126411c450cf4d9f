/*
 * check_client.c: unit tests of client/client.c, the client side of the
 * protocol: picking reply lines apart (fields, pushes, status words,
 * errors, addresses), and reading and sending lines over a socketpair
 * (partial writes, deadlines, over-long lines, the end of the stream, a
 * wakeup descriptor, reading without read-ahead), connecting to
 * listeners of its own over TCP and a Unix socket, and TLS against
 * `openssl s_server` (verification refusals with their reasons, a
 * client certificate, bad files, silent and plain-text peers).  No
 * daemon.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "client/client.h"
#include "tests/runner.h"

#define SLACK_MS    2000    /* a deadline that must not be reached */
#define SHORT_MS    100     /* a deadline that must be reached */

/* ---- helpers ---- */

/* A connected AF_UNIX stream pair: sv[0] for the client, sv[1] for the test. */
static void
pair(int sv[2])
{
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* Write the string s to fd, all of it. */
static void
put(int fd, const char *s)
{
    ck_assert_int_eq(write(fd, s, strlen(s)), (ssize_t)strlen(s));
}

/* Read the next line into c->line, requiring CLIENT_LINE and that text. */
static void
expect_line(struct client *c, const char *want)
{
    enum client_read rc = client_read_line(c, client_now_ms() + SLACK_MS);

    ck_assert_msg(rc == CLIENT_LINE, "read_line gave %d (%s), expected '%s'", rc, c->err, want);
    ck_assert_str_eq(c->line, want);
    ck_assert_uint_eq(c->line_len, strlen(want));
}

/* A listening TCP socket on 127.0.0.1 (port in *port), or on ::1 with v6. */
static int
listen_tcp(int *port, bool v6)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    int fd, one = 1;

    memset(&ss, 0, sizeof(ss));
    if (v6) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    }
    fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, v6 ? sizeof(struct sockaddr_in6)
                                            : sizeof(struct sockaddr_in)) != 0
        || listen(fd, 8) != 0 || getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                     : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

/* ---- parsing ---- */

START_TEST(test_field)
{
    char out[64];

    ck_assert(client_field("OK job validity=29697 holds=1 fence=7", "holds", out,
                           sizeof(out)));
    ck_assert_str_eq(out, "1");
    ck_assert(client_field("OK job validity=29697 holds=1 fence=7", "fence", out,
                           sizeof(out)));
    ck_assert_str_eq(out, "7");
    /* The status and the name are not fields, even with a '='. */
    ck_assert(!client_field("OK ttl=5 validity=1", "ttl", out, sizeof(out)));
    ck_assert(!client_field("ttl=5 x validity=1", "ttl", out, sizeof(out)));
    /* Keys compare whole. */
    ck_assert(!client_field("OK job fencex=1", "fence", out, sizeof(out)));
    ck_assert(!client_field("OK job fence", "fence", out, sizeof(out)));
    ck_assert(!client_field("OK job xfence=1", "fence", out, sizeof(out)));
    /* The first of two, an empty value, a value with '='. */
    ck_assert(client_field("OK job a=1 a=2", "a", out, sizeof(out)));
    ck_assert_str_eq(out, "1");
    ck_assert(client_field("OK job a=", "a", out, sizeof(out)));
    ck_assert_str_eq(out, "");
    ck_assert(client_field("OK job label=h:1=x", "label", out, sizeof(out)));
    ck_assert_str_eq(out, "h:1=x");
    /* A pushed line: "!" is not the status word. */
    ck_assert(client_field("! LOST job reason=renew", "reason", out, sizeof(out)));
    ck_assert_str_eq(out, "renew");
    ck_assert(client_field("! HELD job label=web1:42:sh held_ms=5", "label", out,
                           sizeof(out)));
    ck_assert_str_eq(out, "web1:42:sh");
    /* Too small for the value and its NUL. */
    ck_assert(!client_field("OK job fence=1234", "fence", out, 4));
    ck_assert(client_field("OK job fence=1234", "fence", out, 5));
    ck_assert_str_eq(out, "1234");
    ck_assert(!client_field(NULL, "fence", out, sizeof(out)));
    ck_assert(!client_field("", "fence", out, sizeof(out)));
}
END_TEST

START_TEST(test_field_int)
{
    int64_t v = 0;

    ck_assert(client_field_int("BUSY job ttl=-1", "ttl", &v));
    ck_assert_int_eq(v, -1);
    ck_assert(client_field_int("OK job validity=0029697", "validity", &v));
    ck_assert_int_eq(v, 29697);
    ck_assert(client_field_int("OK job n=999999999999999999", "n", &v));
    ck_assert_int_eq(v, INT64_C(999999999999999999));
    ck_assert(!client_field_int("OK job n=1000000000000000000", "n", &v));
    ck_assert(!client_field_int("OK job n=12a", "n", &v));
    ck_assert(!client_field_int("OK job n=-", "n", &v));
    ck_assert(!client_field_int("OK job n=", "n", &v));
    ck_assert(!client_field_int("OK job n=+1", "n", &v));
    ck_assert(!client_field_int("OK job m=1", "n", &v));
}
END_TEST

START_TEST(test_status_and_push)
{
    ck_assert(client_is_push("! LOST job reason=gone"));
    ck_assert(client_is_push("!"));
    ck_assert(!client_is_push("OK job"));
    ck_assert(!client_is_push(""));
    ck_assert(!client_is_push(NULL));

    ck_assert(client_is_status("OK", "OK"));
    ck_assert(client_is_status("OK job holds=1", "OK"));
    ck_assert(!client_is_status("OKAY", "OK"));
    ck_assert(!client_is_status("ok job", "OK"));
    ck_assert(client_is_status("END", "END"));
    ck_assert(!client_is_status(NULL, "END"));

    ck_assert(client_is_reply("OK job holds=1", "OK", "job"));
    ck_assert(client_is_reply("FREE job", "FREE", "job"));
    ck_assert(!client_is_reply("OK jobs holds=1", "OK", "job"));
    ck_assert(!client_is_reply("OK jo", "OK", "job"));
    ck_assert(!client_is_reply("OKjob", "OK", "job"));
    ck_assert(client_is_reply("! LOST job reason=renew" + 2, "LOST", "job"));
    ck_assert(client_is_reply("! LOST job reason=renew", "! LOST", "job"));
    ck_assert(!client_is_reply(NULL, "OK", "job"));

    ck_assert(client_is_err("ERR PROTO LOCK: missing lock name", "PROTO"));
    ck_assert(client_is_err("ERR DENIED", "DENIED"));
    ck_assert(!client_is_err("ERR PROTOCOL x", "PROTO"));
    ck_assert(!client_is_err("OK PROTO", "PROTO"));
    ck_assert(!client_is_err("ERR", "PROTO"));
    ck_assert_str_eq(client_err_text("ERR NOQUORUM 2 of 5 masters answered"),
                     "2 of 5 masters answered");
    ck_assert_str_eq(client_err_text("ERR DENIED"), "");
    ck_assert_str_eq(client_err_text("HUH job"), "HUH job");
    ck_assert_str_eq(client_err_text("ERR"), "ERR");
}
END_TEST

START_TEST(test_word_and_addr)
{
    char host[64], port[8], big[300];

    ck_assert(client_word_ok("a", 1));
    ck_assert(client_word_ok("!~", 2));
    ck_assert(!client_word_ok("", 10));
    ck_assert(!client_word_ok("abc", 2));
    ck_assert(!client_word_ok("a b", 10));
    ck_assert(!client_word_ok("a\x7f", 10));
    ck_assert(!client_word_ok("\xc3\xa9", 10));

    ck_assert_int_eq(client_split_addr("127.0.0.1:7379", host, sizeof(host), port,
                                       sizeof(port)), 0);
    ck_assert_str_eq(host, "127.0.0.1");
    ck_assert_str_eq(port, "7379");
    ck_assert_int_eq(client_split_addr("[::1]:65535", host, sizeof(host), port,
                                       sizeof(port)), 0);
    ck_assert_str_eq(host, "::1");
    ck_assert_str_eq(port, "65535");
    ck_assert_int_eq(client_split_addr("localhost:1", host, sizeof(host), port,
                                       sizeof(port)), 0);
    ck_assert_int_eq(client_split_addr("::1:7379", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("host", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("host:", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr(":7379", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("h:0", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("h:65536", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("h:99999999999999999999", host, sizeof(host), port,
                                       sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("h:-1", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("h:12x", host, sizeof(host), port, sizeof(port)), -1);
    ck_assert_int_eq(client_split_addr("[::1]7379", host, sizeof(host), port, sizeof(port)),
                     -1);
    ck_assert_int_eq(client_split_addr("[::1:7379", host, sizeof(host), port, sizeof(port)),
                     -1);
    ck_assert_int_eq(client_split_addr("[]:7379", host, sizeof(host), port, sizeof(port)), -1);
    memset(big, 'h', sizeof(big));
    snprintf(big + 64, sizeof(big) - 64, ":7379");
    ck_assert_int_eq(client_split_addr(big, host, sizeof(host), port, sizeof(port)), -1);
    big[63] = ':';
    big[64] = '1';
    big[65] = '\0';
    ck_assert_int_eq(client_split_addr(big, host, sizeof(host), port, sizeof(port)), 0);
    ck_assert_uint_eq(strlen(host), 63);
}
END_TEST

/* ---- reading ---- */

/* Lines arrive in pieces and several at once; each comes out whole, in order. */
START_TEST(test_read_partial)
{
    struct client c;
    int sv[2];

    pair(sv);
    client_init(&c, sv[0], 0);
    put(sv[1], "OK jo");
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SHORT_MS), CLIENT_TIMEOUT);
    ck_assert_int_eq(errno, ETIMEDOUT);
    put(sv[1], "b holds=1");
    ck_assert_int_eq(client_read_line(&c, client_now_ms()), CLIENT_TIMEOUT);
    put(sv[1], "\n! LOST job reason=renew\nNOTHELD job\nPON");
    expect_line(&c, "OK job holds=1");
    expect_line(&c, "! LOST job reason=renew");
    expect_line(&c, "NOTHELD job");
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SHORT_MS), CLIENT_TIMEOUT);
    put(sv[1], "G\n");
    expect_line(&c, "PONG");
    /* One byte at a time. */
    put(sv[1], "B");
    put(sv[1], "U");
    ck_assert_int_eq(client_read_line(&c, client_now_ms()), CLIENT_TIMEOUT);
    put(sv[1], "SY");
    put(sv[1], "\n");
    expect_line(&c, "BUSY");
    client_close(&c);
    ck_assert_int_eq(c.fd, -1);
    close(sv[1]);
}
END_TEST

/* The deadline is kept: neither much earlier nor much later. */
START_TEST(test_read_deadline)
{
    struct client c;
    int64_t t0, took;
    int sv[2];

    pair(sv);
    client_init(&c, sv[0], 0);
    t0 = client_now_ms();
    ck_assert_int_eq(client_read_line(&c, t0 + 200), CLIENT_TIMEOUT);
    took = client_now_ms() - t0;
    ck_assert_msg(took >= 200 && took < 200 + SLACK_MS, "took %lld ms", (long long)took);
    /* A deadline in the past still takes what is there. */
    put(sv[1], "PONG\n");
    ck_assert_int_eq(client_read_line(&c, t0), CLIENT_LINE);
    ck_assert_str_eq(c.line, "PONG");
    client_close(&c);
    close(sv[1]);
}
END_TEST

/* CR before LF: dropped unless CLIENT_KEEP_CR; a NUL byte is kept with line_len. */
START_TEST(test_read_cr_nul)
{
    struct client c;
    int sv[2];

    pair(sv);
    client_init(&c, sv[0], 0);
    put(sv[1], "OK\r\na\rb\n\r\r\n");
    expect_line(&c, "OK");
    expect_line(&c, "a\rb");
    expect_line(&c, "\r");
    c.flags = CLIENT_KEEP_CR;
    put(sv[1], "OK\r\n");
    expect_line(&c, "OK\r");
    ck_assert_int_eq(write(sv[1], "A\0B\n", 4), 4);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_LINE);
    ck_assert_uint_eq(c.line_len, 3);
    ck_assert_int_eq(memcmp(c.line, "A\0B", 4), 0);
    client_close(&c);
    close(sv[1]);
}
END_TEST

/* The longest line fits; one byte more is an error, not a cut line. */
START_TEST(test_read_long_lines)
{
    char *big = malloc(CLIENT_LINE_MAX + 2);    /* x..x, LF, and room for one x more */
    struct client c;
    int sv[2];

    ck_assert_ptr_nonnull(big);
    pair(sv);
    client_init(&c, sv[0], 0);
    memset(big, 'x', CLIENT_LINE_MAX);
    big[CLIENT_LINE_MAX] = '\n';
    ck_assert_int_eq(write(sv[1], big, CLIENT_LINE_MAX + 1), CLIENT_LINE_MAX + 1);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_LINE);
    ck_assert_uint_eq(c.line_len, CLIENT_LINE_MAX);
    ck_assert_uint_eq(strlen(c.line), CLIENT_LINE_MAX);

    /* One more byte, in two writes: an error once the buffer is full. */
    ck_assert_int_eq(write(sv[1], big, 100), 100);
    ck_assert_int_eq(client_read_line(&c, client_now_ms()), CLIENT_TIMEOUT);
    ck_assert_int_eq(write(sv[1], big, CLIENT_LINE_MAX + 1 - 100), CLIENT_LINE_MAX + 1 - 100);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_ERROR);
    ck_assert_int_eq(errno, EMSGSIZE);
    ck_assert_msg(strstr(c.err, "longer than 4096 bytes") != NULL, "err: %s", c.err);
    client_close(&c);
    close(sv[1]);

    /* The same without read-ahead: the longest line, then one byte longer. */
    pair(sv);
    client_init(&c, sv[0], CLIENT_EXACT);
    ck_assert_int_eq(write(sv[1], big, CLIENT_LINE_MAX + 1), CLIENT_LINE_MAX + 1);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_LINE);
    ck_assert_uint_eq(c.line_len, CLIENT_LINE_MAX);
    big[CLIENT_LINE_MAX] = 'x';
    big[CLIENT_LINE_MAX + 1] = '\n';
    ck_assert_int_eq(write(sv[1], big, CLIENT_LINE_MAX + 2), CLIENT_LINE_MAX + 2);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_ERROR);
    ck_assert_int_eq(errno, EMSGSIZE);
    client_close(&c);
    close(sv[1]);
    free(big);
}
END_TEST

/* The end of the stream: whole lines first, then CLIENT_EOF; a partial line is dropped. */
START_TEST(test_read_eof)
{
    struct client c;
    int sv[2];

    pair(sv);
    client_init(&c, sv[0], 0);
    put(sv[1], "BYE\nHAL");
    ck_assert_int_eq(shutdown(sv[1], SHUT_WR), 0);
    expect_line(&c, "BYE");
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_EOF);
    ck_assert_int_eq(errno, 0);
    ck_assert_uint_eq(c.inlen, 0);
    ck_assert_msg(strstr(c.err, "closed the connection") != NULL, "err: %s", c.err);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_EOF);
    client_close(&c);
    close(sv[1]);

    /* No connection and nothing to wait for. */
    client_init(&c, -1, 0);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_ERROR);
    ck_assert_int_eq(errno, ENOTCONN);
}
END_TEST

/* CLIENT_EXACT takes nothing past the line: the rest stays in the socket. */
START_TEST(test_read_exact)
{
    char rest[16];
    struct client c;
    int sv[2];

    pair(sv);
    client_init(&c, sv[0], CLIENT_EXACT | CLIENT_KEEP_CR);
    put(sv[1], "OK a\r\nOK b\nOK");
    expect_line(&c, "OK a\r");
    ck_assert_uint_eq(c.inlen, 0);
    ck_assert_int_eq(recv(sv[0], rest, sizeof(rest), MSG_DONTWAIT), 7);
    ck_assert_int_eq(memcmp(rest, "OK b\nOK", 7), 0);
    /* A line in pieces. */
    put(sv[1], "PO");
    ck_assert_int_eq(client_read_line(&c, client_now_ms()), CLIENT_TIMEOUT);
    put(sv[1], "NG\nVERSION 1\n");
    expect_line(&c, "PONG");
    expect_line(&c, "VERSION 1");
    client_close(&c);
    close(sv[1]);
}
END_TEST

/* A readable wakeup descriptor ends the wait, before a buffered line too. */
START_TEST(test_read_wakeup)
{
    struct client c;
    int sv[2], p[2];
    char b;

    pair(sv);
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    client_init(&c, sv[0], 0);
    c.wakeup = p[0];
    put(sv[1], "A\nB\n");
    expect_line(&c, "A");
    put(p[1], "x");
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_INTR);
    ck_assert_int_eq(errno, EINTR);
    ck_assert_int_eq(read(p[0], &b, 1), 1);
    expect_line(&c, "B");
    put(p[1], "x");
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_INTR);
    ck_assert_int_eq(read(p[0], &b, 1), 1);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SHORT_MS), CLIENT_TIMEOUT);

    /* Closed: the wakeup and the deadline are still waited for. */
    client_close(&c);
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SHORT_MS), CLIENT_TIMEOUT);
    put(p[1], "x");
    ck_assert_int_eq(client_read_line(&c, -1), CLIENT_INTR);
    close(p[0]);
    close(p[1]);
    close(sv[1]);
}
END_TEST

/* ---- sending ---- */

START_TEST(test_send)
{
    char buf[64], *big;
    size_t bigsize = 16 * 1024 * 1024;
    struct client c;
    int sv[2], size = 4096;
    ssize_t n;

    pair(sv);
    client_init(&c, sv[0], 0);
    ck_assert_int_eq(client_send(&c, "LOCK job ttl=5000", client_now_ms() + SLACK_MS), 0);
    ck_assert_int_eq(client_write(&c, "PI", 2, -1), 0);
    ck_assert_int_eq(client_write(&c, "NG\n", 3, -1), 0);
    n = recv(sv[1], buf, sizeof(buf), 0);
    while (n > 0 && n < 23) {
        /* Three sends may arrive apart. */
        n += recv(sv[1], buf + n, sizeof(buf) - (size_t)n, 0);
    }
    ck_assert_int_eq(n, 23);
    ck_assert_int_eq(memcmp(buf, "LOCK job ttl=5000\nPING\n", 23), 0);

    /* A peer that reads nothing: the deadline ends the send. */
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
    big = malloc(bigsize);
    ck_assert_ptr_nonnull(big);
    memset(big, 'x', bigsize);
    ck_assert_int_eq(client_write(&c, big, bigsize, client_now_ms() + SHORT_MS), -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    free(big);

    /* A closed peer is EPIPE, not SIGPIPE. */
    close(sv[1]);
    ck_assert_int_eq(client_send(&c, "PING", client_now_ms() + SLACK_MS), -1);
    ck_assert_msg(errno == EPIPE || errno == ECONNRESET, "errno %d", errno);
    client_close(&c);
    ck_assert_int_eq(client_send(&c, "PING", -1), -1);
    ck_assert_int_eq(errno, ENOTCONN);
}
END_TEST

/* ---- connecting ---- */

START_TEST(test_connect_tcp)
{
    char addr[64];
    struct client c;
    int lfd, fd, port;

    client_init(&c, -1, 0);
    lfd = listen_tcp(&port, false);
    ck_assert_int_ge(lfd, 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_msg(client_connect_tcp(&c, addr, client_now_ms() + SLACK_MS) == 0, "%s", c.err);
    ck_assert_int_eq(fcntl(c.fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_ne(fcntl(c.fd, F_GETFD) & FD_CLOEXEC, 0);
    fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    put(fd, "PONG\n");
    expect_line(&c, "PONG");
    close(fd);
    /* localhost resolves, and a new connect replaces the old one. */
    snprintf(addr, sizeof(addr), "localhost:%d", port);
    ck_assert_msg(client_connect_tcp(&c, addr, client_now_ms() + SLACK_MS) == 0, "%s", c.err);
    client_close(&c);
    close(lfd);

    /* Nobody listens any more. */
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_int_eq(client_connect_tcp(&c, addr, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, ECONNREFUSED);
    ck_assert_int_eq(c.fd, -1);
    ck_assert_msg(strstr(c.err, addr) != NULL && strstr(c.err, "refused") != NULL, "%s",
                  c.err);
    ck_assert_int_eq(client_connect_tcp(&c, "127.0.0.1", client_now_ms() + SLACK_MS), -1);
    ck_assert_str_eq(c.err, "127.0.0.1: not HOST:PORT");

    /* IPv6, where the machine has it. */
    lfd = listen_tcp(&port, true);
    if (lfd >= 0) {
        snprintf(addr, sizeof(addr), "[::1]:%d", port);
        ck_assert_msg(client_connect_tcp(&c, addr, client_now_ms() + SLACK_MS) == 0, "%s",
                      c.err);
        client_close(&c);
        close(lfd);
    }
}
END_TEST

START_TEST(test_connect_unix)
{
    char dir[] = "/tmp/check_client.XXXXXX", path[256], big[200];
    struct sockaddr_un sa;
    struct client c;
    int lfd, fd, wp[2];

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/s.sock", dir);
    client_init(&c, -1, 0);
    ck_assert_int_eq(client_connect_unix(&c, path, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_msg(strncmp(c.err, path, strlen(path)) == 0, "%s", c.err);

    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(lfd, 0);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(lfd, 8), 0);
    ck_assert_msg(client_connect_unix(&c, path, client_now_ms() + SLACK_MS) == 0, "%s", c.err);
    fd = accept(lfd, NULL, NULL);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(client_send(&c, "STATUS job", -1), 0);
    client_close(&c);
    client_init(&c, fd, 0);
    expect_line(&c, "STATUS job");
    client_close(&c);

    /* A wakeup descriptor already readable does not stop a connect that is done at once. */
    ck_assert_int_eq(pipe2(wp, O_CLOEXEC), 0);
    put(wp[1], "x");
    client_init(&c, -1, 0);
    c.wakeup = wp[0];
    ck_assert_msg(client_connect_unix(&c, path, client_now_ms() + SLACK_MS) == 0, "%s", c.err);
    client_close(&c);
    close(wp[0]);
    close(wp[1]);

    memset(big, 'p', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    big[0] = '/';
    ck_assert_int_eq(client_connect_unix(&c, big, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, ENAMETOOLONG);
    close(lfd);
    unlink(path);
    rmdir(dir);
}
END_TEST

/* ---- TLS, against openssl s_server ---- */

/*
 * The TLS tests run `openssl s_server -rev` (it answers each line
 * reversed) on a free loopback port with the certificates of
 * tests/tls/make-certs.sh, made once for the test case in tls_dir.  The
 * server's output (without -quiet: "ACCEPT" once it listens, the
 * client's certificate) goes to tls_dir/server.out.
 */
static char tls_dir[] = "/tmp/check_client_tls.XXXXXX";

/* Unchecked fixture: the certificates. */
static void
tls_setup(void)
{
    char cmd[512];

    ck_assert_ptr_nonnull(mkdtemp(tls_dir));
    snprintf(cmd, sizeof(cmd), "sh tests/tls/make-certs.sh '%s'", tls_dir);
    ck_assert_msg(system(cmd) == 0, "%s failed (run from the top of the repository)", cmd);
}

static void
tls_teardown(void)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tls_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "check_client: cannot remove %s\n", tls_dir);
    }
}

/* tls_dir/name into out; returns out. */
static const char *
tls_file(char *out, size_t size, const char *name)
{
    ck_assert_int_lt(snprintf(out, size, "%s/%s", tls_dir, name), (int)size);
    return out;
}

/* What openssl s_server printed so far (malloc'd, "" when nothing). */
static char *
tls_server_out(void)
{
    char path[256], *buf = calloc(1, 65536);
    FILE *f;
    size_t n;

    ck_assert_ptr_nonnull(buf);
    f = fopen(tls_file(path, sizeof(path), "server.out"), "re");
    if (f != NULL) {
        n = fread(buf, 1, 65535, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/*
 * Start openssl s_server -rev on a free port (in *port) with certificate
 * name.crt and its key, for naccept connections, with extra arguments
 * (NULL-terminated), and wait until it listens.  Returns its pid.
 */
static pid_t
tls_server_start(const char *name, int naccept, int *port, const char *const *extra)
{
    char accept_at[64], cert[256], key[256], out[256], nacc[16], *seen;
    const char *argv[32];
    int64_t until;
    size_t n = 0;
    pid_t pid;
    int lfd, fd;
    bool up;

    lfd = listen_tcp(port, false);
    ck_assert_int_ge(lfd, 0);
    close(lfd);
    snprintf(accept_at, sizeof(accept_at), "127.0.0.1:%d", *port);
    snprintf(nacc, sizeof(nacc), "%d", naccept);
    snprintf(cert, sizeof(cert), "%s/%s.crt", tls_dir, name);
    snprintf(key, sizeof(key), "%s/%s.key", tls_dir, name);
    tls_file(out, sizeof(out), "server.out");
    argv[n++] = "openssl";
    argv[n++] = "s_server";
    argv[n++] = "-accept";
    argv[n++] = accept_at;
    argv[n++] = "-cert";
    argv[n++] = cert;
    argv[n++] = "-key";
    argv[n++] = key;
    argv[n++] = "-naccept";
    argv[n++] = nacc;
    argv[n++] = "-rev";
    while (extra != NULL && *extra != NULL && n < sizeof(argv) / sizeof(argv[0]) - 1) {
        argv[n++] = *extra++;
    }
    argv[n] = NULL;
    unlink(out);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0) {
            _exit(127);
        }
        execvp("openssl", (char *const *)argv);
        _exit(127);
    }
    until = client_now_ms() + 5000;
    do {
        usleep(10000);
        seen = tls_server_out();
        up = strstr(seen, "ACCEPT") != NULL;
        free(seen);
    } while (!up && client_now_ms() < until);
    if (!up) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        seen = tls_server_out();
        ck_abort_msg("openssl s_server did not start: %s", seen);
    }
    return pid;
}

static void
tls_server_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

/* Connect c to 127.0.0.1:port over TCP (no TLS yet). */
static void
tls_connect(struct client *c, int port)
{
    char addr[64];

    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    ck_assert_msg(client_connect_tcp(c, addr, client_now_ms() + SLACK_MS) == 0, "%s", c->err);
}

/*
 * Connect to the server on port and start TLS for host with CA file
 * ca_name; it must fail: errno EPROTO, c->err containing want, c closed.
 */
static void
tls_expect_refused(int port, const char *host, const char *ca_name, const char *want)
{
    struct client_tls_opts opts = { NULL, NULL, NULL };
    struct client c;
    char ca[256];

    client_init(&c, -1, 0);
    opts.ca_file = tls_file(ca, sizeof(ca), ca_name);
    tls_connect(&c, port);
    ck_assert_int_eq(client_start_tls(&c, host, &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, EPROTO);
    ck_assert_msg(strstr(c.err, want) != NULL, "c.err is '%s', expected '%s' in it", c.err,
                  want);
    ck_assert_msg(strncmp(c.err, "TLS handshake: ", 15) == 0, "c.err is '%s'", c.err);
    ck_assert_int_eq(c.fd, -1);
    ck_assert_ptr_null(c.tls);
}

START_TEST(test_tls_handshake)
{
    struct client_tls_opts opts = { NULL, NULL, NULL };
    struct client c;
    char ca[256], buf[64];
    int port, wp[2];
    pid_t pid;

    pid = tls_server_start("server", 3, &port, NULL);
    opts.ca_file = tls_file(ca, sizeof(ca), "ca.crt");

    /* 127.0.0.1 is checked as an address; lines go both ways. */
    client_init(&c, -1, 0);
    tls_connect(&c, port);
    ck_assert_msg(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS) == 0,
                  "%s", c.err);
    ck_assert_ptr_nonnull(c.tls);
    ck_assert_int_eq(fcntl(c.fd, F_GETFL) & O_NONBLOCK, 0);
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, -1), -1);
    ck_assert_int_eq(errno, EISCONN);
    ck_assert_int_eq(client_send(&c, "hello", client_now_ms() + SLACK_MS), 0);
    expect_line(&c, "olleh");
    /* Two lines in one write come back as two lines. */
    ck_assert_int_eq(client_write(&c, "ab\ncd\n", 6, client_now_ms() + SLACK_MS), 0);
    expect_line(&c, "ba");
    expect_line(&c, "dc");
    /* Nothing more: the deadline, then a wakeup descriptor. */
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SHORT_MS), CLIENT_TIMEOUT);
    ck_assert_int_eq(pipe2(wp, O_CLOEXEC), 0);
    put(wp[1], "x");
    c.wakeup = wp[0];
    ck_assert_int_eq(client_read_line(&c, client_now_ms() + SLACK_MS), CLIENT_INTR);
    ck_assert_int_eq(read(wp[0], buf, sizeof(buf)), 1);
    ck_assert_int_eq(client_send(&c, "wake", client_now_ms() + SLACK_MS), 0);
    expect_line(&c, "ekaw");
    close(wp[0]);
    close(wp[1]);
    client_close(&c);
    ck_assert_ptr_null(c.tls);
    ck_assert_int_eq(c.fd, -1);

    /* A name is checked against the DNS names (and sent as SNI); CLIENT_EXACT reads by line. */
    client_init(&c, -1, CLIENT_EXACT);
    tls_connect(&c, port);
    ck_assert_msg(client_start_tls(&c, "localhost", &opts, client_now_ms() + SLACK_MS) == 0,
                  "%s", c.err);
    ck_assert_int_eq(client_write(&c, "one\ntwo\n", 8, client_now_ms() + SLACK_MS), 0);
    expect_line(&c, "eno");
    ck_assert_uint_eq(c.inlen, 0);
    expect_line(&c, "owt");
    client_close(&c);

    /*
     * The end of the stream is CLIENT_EOF, as in plain TCP, or a reset
     * (CLIENT_ERROR, ECONNRESET) when the killed server's kernel still had
     * bytes of ours unread: never a line, never a wait to the deadline.
     */
    client_init(&c, -1, 0);
    tls_connect(&c, port);
    ck_assert_msg(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS) == 0,
                  "%s", c.err);
    tls_server_stop(pid);
    {
        enum client_read got = client_read_line(&c, client_now_ms() + SLACK_MS);

        ck_assert_msg(got == CLIENT_EOF || (got == CLIENT_ERROR && errno == ECONNRESET),
                      "the end of a TLS stream read as %d (%s)", (int)got, c.err);
    }
    client_close(&c);
}
END_TEST

/* A certificate from a CA that is not ours. */
START_TEST(test_tls_wrong_ca)
{
    int port;
    pid_t pid = tls_server_start("other", 1, &port, NULL);

    tls_expect_refused(port, "127.0.0.1", "ca.crt",
                       "certificate verify failed: unable to get local issuer certificate");
    tls_server_stop(pid);
}
END_TEST

/* A valid certificate for another name, checked as an address and as a name. */
START_TEST(test_tls_wrong_name)
{
    int port;
    pid_t pid = tls_server_start("wrongname", 2, &port, NULL);

    tls_expect_refused(port, "127.0.0.1", "ca.crt",
                       "certificate verify failed: IP address mismatch");
    tls_expect_refused(port, "localhost", "ca.crt",
                       "certificate verify failed: hostname mismatch");
    tls_server_stop(pid);
}
END_TEST

START_TEST(test_tls_expired)
{
    int port;
    pid_t pid = tls_server_start("expired", 1, &port, NULL);

    tls_expect_refused(port, "127.0.0.1", "ca.crt",
                       "certificate verify failed: certificate has expired");
    tls_server_stop(pid);
}
END_TEST

/* A server that requires a client certificate gets ours; without one it refuses. */
START_TEST(test_tls_client_cert)
{
    static const char *const verify[] = { "-Verify", "1", "-verify_return_error", "-CAfile",
                                          NULL, NULL };
    const char *extra[sizeof(verify) / sizeof(verify[0])];
    struct client_tls_opts opts = { NULL, NULL, NULL };
    char ca[256], cert[256], key[256], *out;
    struct client c;
    enum client_read rc;
    int port;
    pid_t pid;

    memcpy(extra, verify, sizeof(verify));
    extra[4] = tls_file(ca, sizeof(ca), "ca.crt");
    pid = tls_server_start("server", 2, &port, extra);
    opts.ca_file = ca;
    opts.cert_file = tls_file(cert, sizeof(cert), "client.crt");
    opts.key_file = tls_file(key, sizeof(key), "client.key");
    client_init(&c, -1, 0);
    tls_connect(&c, port);
    ck_assert_msg(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS) == 0,
                  "%s", c.err);
    ck_assert_int_eq(client_send(&c, "certified", client_now_ms() + SLACK_MS), 0);
    expect_line(&c, "deifitrec");
    client_close(&c);
    out = tls_server_out();
    ck_assert_msg(strstr(out, "Peer certificate: CN = redlockd-test-client") != NULL,
                  "s_server saw no client certificate: %s", out);
    free(out);

    /*
     * Without one: in TLS 1.3 the client's side of the handshake ends
     * before the server has looked, so the refusal may come as the first
     * read; either way it names the reason.
     */
    opts.cert_file = NULL;
    opts.key_file = NULL;
    tls_connect(&c, port);
    if (client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS) == 0) {
        client_send(&c, "anonymous", client_now_ms() + SLACK_MS);
        rc = client_read_line(&c, client_now_ms() + SLACK_MS);
        ck_assert_msg(rc == CLIENT_ERROR, "read gave %d (%s)", rc, c.err);
    }
    ck_assert_msg(strstr(c.err, "certificate required") != NULL, "c.err is '%s'", c.err);
    client_close(&c);
    tls_server_stop(pid);
}
END_TEST

/* Files that cannot be used, refused before any byte is sent; c is closed. */
START_TEST(test_tls_files)
{
    struct client_tls_opts opts = { NULL, NULL, NULL };
    char ca[256], cert[256], key[256], other_key[256], missing[256];
    struct client c;
    int sv[2];

    tls_file(ca, sizeof(ca), "ca.crt");
    tls_file(cert, sizeof(cert), "client.crt");
    tls_file(key, sizeof(key), "client.key");
    tls_file(other_key, sizeof(other_key), "server.key");
    tls_file(missing, sizeof(missing), "missing.crt");

    client_init(&c, -1, 0);
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", NULL, -1), -1);
    ck_assert_int_eq(errno, ENOTCONN);

    pair(sv);
    client_init(&c, sv[0], 0);
    opts.ca_file = missing;
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, ENOENT);
    ck_assert_msg(strncmp(c.err, missing, strlen(missing)) == 0
                  && strstr(c.err, "No such file") != NULL, "%s", c.err);
    ck_assert_int_eq(c.fd, -1);
    close(sv[1]);

    /* A file that holds no certificate. */
    pair(sv);
    client_init(&c, sv[0], 0);
    opts.ca_file = key;
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_msg(strncmp(c.err, key, strlen(key)) == 0, "%s", c.err);
    close(sv[1]);

    /* A certificate without its key, and a key that is not the certificate's. */
    pair(sv);
    client_init(&c, sv[0], 0);
    opts.ca_file = ca;
    opts.cert_file = cert;
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, EINVAL);
    close(sv[1]);
    pair(sv);
    client_init(&c, sv[0], 0);
    opts.key_file = other_key;
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_msg(strncmp(c.err, other_key, strlen(other_key)) == 0
                  && strstr(c.err, "mismatch") != NULL, "%s", c.err);
    close(sv[1]);
}
END_TEST

/* A peer that does not answer (deadline, wakeup) or answers in plain text. */
START_TEST(test_tls_silent_and_plain)
{
    struct client_tls_opts opts = { NULL, NULL, NULL };
    char ca[256], hello[512];
    struct client c;
    int64_t start;
    int sv[2], wp[2];

    opts.ca_file = tls_file(ca, sizeof(ca), "ca.crt");
    pair(sv);
    client_init(&c, sv[0], 0);
    start = client_now_ms();
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, start + SHORT_MS), -1);
    ck_assert_int_eq(errno, ETIMEDOUT);
    ck_assert_int_ge(client_now_ms() - start, SHORT_MS);
    ck_assert_str_eq(c.err, "TLS handshake: no answer in time");
    close(sv[1]);

    pair(sv);
    ck_assert_int_eq(pipe2(wp, O_CLOEXEC), 0);
    put(wp[1], "x");
    client_init(&c, sv[0], 0);
    c.wakeup = wp[0];
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, EINTR);
    close(sv[1]);
    close(wp[0]);
    close(wp[1]);

    /* A plain-text server answers the ClientHello with a line of its own. */
    pair(sv);
    client_init(&c, sv[0], 0);
    put(sv[1], "ERR PROTO unknown command\n");
    ck_assert_int_eq(client_start_tls(&c, "127.0.0.1", &opts, client_now_ms() + SLACK_MS), -1);
    ck_assert_int_eq(errno, EPROTO);
    ck_assert_msg(strncmp(c.err, "TLS handshake: ", 15) == 0, "%s", c.err);
    ck_assert_int_gt(read(sv[1], hello, sizeof(hello)), 0);
    close(sv[1]);
}
END_TEST

static Suite *
client_suite(void)
{
    Suite *s = suite_create("client");
    TCase *tc;

    tc = tcase_create("parse");
    tcase_add_test(tc, test_field);
    tcase_add_test(tc, test_field_int);
    tcase_add_test(tc, test_status_and_push);
    tcase_add_test(tc, test_word_and_addr);
    suite_add_tcase(s, tc);

    tc = tcase_create("read");
    tcase_add_test(tc, test_read_partial);
    tcase_add_test(tc, test_read_deadline);
    tcase_add_test(tc, test_read_cr_nul);
    tcase_add_test(tc, test_read_long_lines);
    tcase_add_test(tc, test_read_eof);
    tcase_add_test(tc, test_read_exact);
    tcase_add_test(tc, test_read_wakeup);
    suite_add_tcase(s, tc);

    tc = tcase_create("send_connect");
    tcase_add_test(tc, test_send);
    tcase_add_test(tc, test_connect_tcp);
    tcase_add_test(tc, test_connect_unix);
    suite_add_tcase(s, tc);

    tc = tcase_create("tls");
    tcase_add_unchecked_fixture(tc, tls_setup, tls_teardown);
    tcase_add_test(tc, test_tls_handshake);
    tcase_add_test(tc, test_tls_wrong_ca);
    tcase_add_test(tc, test_tls_wrong_name);
    tcase_add_test(tc, test_tls_expired);
    tcase_add_test(tc, test_tls_client_cert);
    tcase_add_test(tc, test_tls_files);
    tcase_add_test(tc, test_tls_silent_and_plain);
    suite_add_tcase(s, tc);

    return s;
}

const struct runner runner_main = { "check_client", client_suite, NULL, NULL };
