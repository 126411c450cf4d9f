/*
 * check_client.c: unit tests of client/client.c, the client side of the
 * protocol: picking reply lines apart (fields, pushes, status words,
 * errors, addresses), and reading and sending lines over a socketpair
 * (partial writes, deadlines, over-long lines, the end of the stream, a
 * wakeup descriptor, reading without read-ahead), and connecting to
 * listeners of its own over TCP and a Unix socket.  No daemon.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "client/client.h"

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

    return s;
}

int
main(void)
{
    SRunner *sr = srunner_create(client_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
