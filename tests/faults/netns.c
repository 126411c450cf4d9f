/*
 * netns.c: namespaces, veth pairs and a bridge for the fault suite's
 * network scenarios (see netns.h).  Every change is made with the `ip`
 * and `iptables` commands, whose output goes to the log; a namespace is
 * entered with setns(2) in the child before exec (h_spawn_in).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <sys/wait.h>

#include "tests/faults/netns.h"
#include "tests/harness.h"

#define NETNS_WORDS_MAX     32      /* words of one command */
#define NETNS_LINE_MAX      512     /* one command line */
#define NETNS_NAME_MAX      16      /* an interface name, NUL included (IFNAMSIZ) */
#define NETNS_NS_MAX        40      /* a namespace name, NUL included */
#define NETNS_SUBNET_BASE   "10.231" /* first two octets of every subnet */
#define NETNS_SUBNETS       200     /* third octets tried: 20..219 */
#define NETNS_HOST_BASE     10      /* host i is .(10 + i) */
#define NETNS_UNDO_MAX      (2 * NETNS_HOSTS_MAX + 4) /* commands of a teardown */
#define NETNS_UNDO_WORDS    3       /* words of a teardown command after `ip` */

/* One host of the topology. */
struct netns_host {
    char name[NETNS_HOST_NAME_MAX + 1]; /* short name, "m0" */
    char ns[NETNS_NS_MAX];          /* its namespace, rlft<pid>-<name> */
    char veth[NETNS_NAME_MAX];      /* the veth end in the root namespace */
    char addr[NETNS_ADDR_MAX];      /* its address on eth0 */
};

/*
 * A teardown command prepared in advance, so that a signal handler can
 * run it with fork and execve alone.
 */
struct netns_undo {
    char  words[NETNS_UNDO_WORDS][NETNS_NS_MAX]; /* its words after `ip` */
    char *argv[NETNS_UNDO_WORDS + 2];   /* netns_ip, then words, NULL-terminated */
};

/*
 * File-level state: one topology at a time, made by netns_up() and
 * removed by netns_down() (or the signal handler, or at exit).
 */
static char netns_log_path[PATH_MAX];          /* netns_init(): the commands' log */
static char netns_ip[PATH_MAX];                /* path of `ip` */
static char netns_ipt[PATH_MAX];               /* path of `iptables` */
static pid_t netns_owner;                      /* the suite's pid (names carry it) */
static bool netns_hooked;                      /* atexit and handlers installed */
static struct netns_host netns_hosts[NETNS_HOSTS_MAX]; /* hosts of the topology */
static size_t netns_nhosts;                    /* entries in netns_hosts */
static char netns_bridge[NETNS_NAME_MAX];      /* the bridge, "" when none */
static char netns_gw[NETNS_ADDR_MAX];          /* the bridge's address */
static struct netns_undo netns_undo[NETNS_UNDO_MAX]; /* the teardown */
static volatile sig_atomic_t netns_nundo;      /* commands in netns_undo; 0: nothing to undo */
static char *const netns_noenv[] = { NULL };   /* the teardown's environment */

/* ---- running commands ---- */

/* Append a line to the log. */
__attribute__((format(printf, 1, 2)))
static void
netns_logf(const char *fmt, ...)
{
    va_list ap;
    FILE *f = fopen(netns_log_path, "ae");

    if (f == NULL) {
        return;
    }
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

/*
 * Run a command line (split at spaces; its first word "ip" or
 * "iptables" is replaced by the path found at init) in namespace ns
 * (NULL: here), its output to the log.  Returns its exit status, or -1
 * when it could not be run.
 */
__attribute__((format(printf, 2, 3)))
static int
netns_run(const char *ns, const char *fmt, ...)
{
    char line[NETNS_LINE_MAX], *argv[NETNS_WORDS_MAX + 1], *save = NULL, *w;
    size_t n = 0;
    va_list ap;
    int status;
    pid_t pid;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    netns_logf("+ %s%s%s%s", ns != NULL ? "[" : "", ns != NULL ? ns : "",
               ns != NULL ? "] " : "", line);
    for (w = strtok_r(line, " ", &save); w != NULL && n < NETNS_WORDS_MAX;
         w = strtok_r(NULL, " ", &save)) {
        argv[n++] = w;
    }
    argv[n] = NULL;
    if (n == 0) {
        return -1;
    }
    if (strcmp(argv[0], "ip") == 0) {
        argv[0] = netns_ip;
    } else if (strcmp(argv[0], "iptables") == 0) {
        argv[0] = netns_ipt;
    }
    pid = h_spawn_in((const char *const *)argv, netns_log_path, ns);
    if (pid < 0) {
        return -1;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            return -1;
        }
    }
    status = h_decode_status(status);
    if (status != 0) {
        netns_logf("  (exit status %d)", status);
    }
    return status;
}

/* The first executable file called name in $PATH (or /usr/sbin, /sbin), into out. */
static bool
netns_find(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH"), *p, *end;
    char dirs[PATH_MAX * 2];

    snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin", path != NULL ? path : "/usr/bin:/bin");
    for (p = dirs; *p != '\0'; p = *end == ':' ? end + 1 : end) {
        end = strchr(p, ':');
        if (end == NULL) {
            end = p + strlen(p);
        }
        if (end > p && (size_t)snprintf(out, size, "%.*s/%s", (int)(end - p), p, name) < size
            && access(out, X_OK) == 0) {
            return true;
        }
    }
    out[0] = '\0';
    return false;
}

/* ---- the teardown, also from a signal handler ---- */

/* Add "ip <a> <b> <c>" to the teardown (not yet visible to the handler). */
static void
netns_undo_add(size_t *n, const char *a, const char *b, const char *c)
{
    const char *words[NETNS_UNDO_WORDS] = { a, b, c };
    struct netns_undo *u = &netns_undo[*n];
    size_t k;

    if (*n == NETNS_UNDO_MAX) {
        return;
    }
    u->argv[0] = netns_ip;
    for (k = 0; k < NETNS_UNDO_WORDS; k++) {
        snprintf(u->words[k], sizeof(u->words[k]), "%s", words[k]);
        u->argv[k + 1] = u->words[k];
    }
    u->argv[k + 1] = NULL;
    (*n)++;
}

/*
 * Run the prepared teardown: fork, execve, waitpid only (it may run in
 * a signal handler).  Namespaces go first (their ends of the veth pairs
 * with them), then the root ends and the bridge, which the kernel may
 * not have removed yet.
 */
static void
netns_undo_run(void)
{
    sig_atomic_t n = netns_nundo, k;
    pid_t pid;
    int fd;

    netns_nundo = 0;
    for (k = 0; k < n; k++) {
        pid = fork();
        if (pid == 0) {
            fd = open("/dev/null", O_WRONLY);
            if (fd >= 0) {
                dup2(fd, 1);
                dup2(fd, 2);
            }
            execve(netns_undo[k].argv[0], netns_undo[k].argv, netns_noenv);
            _exit(127);
        }
        if (pid > 0) {
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
                continue;
            }
        }
    }
}

/* SIGINT, SIGTERM, SIGHUP: remove the topology, then die of the signal. */
static void
netns_signal_cb(int sig)
{
    int saved = errno;

    if (getpid() == netns_owner) {
        netns_undo_run();
    }
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

static void
netns_atexit_cb(void)
{
    if (getpid() == netns_owner) {
        netns_down();
    }
}

static void
netns_hook(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa;
    size_t i;

    if (netns_hooked) {
        return;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = netns_signal_cb;
    sigfillset(&sa.sa_mask);
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        sigaction(sigs[i], &sa, NULL);
    }
    atexit(netns_atexit_cb);
    netns_hooked = true;
}

/* ---- names, subnet, leftovers ---- */

/* The pid in a name made by this module ("rlft<pid>..."), or -1. */
static long
netns_name_pid(const char *name)
{
    size_t plen = strlen(NETNS_PREFIX);
    char *end;
    long pid;

    if (strncmp(name, NETNS_PREFIX, plen) != 0 || !isdigit((unsigned char)name[plen])) {
        return -1;
    }
    pid = strtol(name + plen, &end, 10);
    return end != name + plen && pid > 0 ? pid : -1;
}

/* True when a name of this module belongs to a run whose process is gone. */
static bool
netns_is_leftover(const char *name)
{
    long pid = netns_name_pid(name);

    return pid > 0 && pid != (long)netns_owner && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Remove the namespaces and links of earlier runs that are dead. */
static void
netns_remove_leftovers(void)
{
    char cmd[PATH_MAX + 32], line[512], *name, *end;
    size_t removed = 0;
    struct dirent *de;
    DIR *d;
    FILE *p;

    d = opendir("/run/netns");
    if (d != NULL) {
        while ((de = readdir(d)) != NULL) {
            if (netns_is_leftover(de->d_name)) {
                removed += netns_run(NULL, "ip netns del %s", de->d_name) == 0;
            }
        }
        closedir(d);
    }
    /* "7: rlft123m0@if6: <BROADCAST,..." */
    snprintf(cmd, sizeof(cmd), "%s -o link show 2>/dev/null", netns_ip);
    p = popen(cmd, "r");
    while (p != NULL && fgets(line, sizeof(line), p) != NULL) {
        name = strchr(line, ':');
        if (name == NULL) {
            continue;
        }
        name += strspn(name + 1, " ") + 1;
        end = name + strcspn(name, "@: ");
        *end = '\0';
        if (netns_is_leftover(name)) {
            removed += netns_run(NULL, "ip link del %s", name) == 0;
        }
    }
    if (p != NULL) {
        pclose(p);
    }
    if (removed > 0) {
        printf("faults: removed %zu namespaces and links left by earlier runs (%s*)\n",
               removed, NETNS_PREFIX);
    }
}

/* Parse "a.b.c.d" or "a.b.c.d/len" into *net and *len (32 when absent).  True when it is one. */
static bool
netns_parse_prefix(const char *s, uint32_t *net, int *len)
{
    char buf[32], *slash;
    struct in_addr a;

    snprintf(buf, sizeof(buf), "%s", s);
    slash = strchr(buf, '/');
    *len = 32;
    if (slash != NULL) {
        *slash = '\0';
        *len = atoi(slash + 1);
    }
    if (inet_pton(AF_INET, buf, &a) != 1 || *len < 0 || *len > 32) {
        return false;
    }
    *net = ntohl(a.s_addr);
    return true;
}

/* True when some route of the machine (any table, the default excepted) overlaps 10.231.n.0/24. */
static bool
netns_subnet_taken(int n)
{
    static const char *const types[] = { "local", "broadcast", "unicast", "unreachable",
                                         "blackhole", "prohibit", "throw", "multicast",
                                         "anycast", "nat" };
    char cmd[PATH_MAX + 64], line[512], word[64];
    uint32_t mine = (10u << 24) | (231u << 16) | ((uint32_t)n << 8), net, mask;
    const char *p;
    bool taken = false;
    size_t k;
    FILE *f;
    int len;

    snprintf(cmd, sizeof(cmd), "%s -4 route show table all 2>/dev/null", netns_ip);
    f = popen(cmd, "r");
    if (f == NULL) {
        return true;
    }
    while (!taken && fgets(line, sizeof(line), f) != NULL) {
        p = line;
        if (sscanf(p, "%63s", word) != 1) {
            continue;
        }
        for (k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            if (strcmp(word, types[k]) == 0) {
                p += strspn(p, " ") + strlen(word);
                if (sscanf(p, "%63s", word) != 1) {
                    word[0] = '\0';
                }
                break;
            }
        }
        if (!netns_parse_prefix(word, &net, &len)) {
            continue;           /* "default" and what is not an address */
        }
        if (len > 24) {
            len = 24;           /* the shorter of the two prefixes decides */
        }
        mask = len == 0 ? 0 : 0xffffffffu << (32 - len);
        taken = (net & mask) == (mine & mask);
    }
    pclose(f);
    return taken;
}

/* Prepare the names of a topology of n hosts (and its teardown). */
static void
netns_name_hosts(const char *const *names, size_t n, int octet)
{
    size_t i, k = 0;

    /* A pid has at most 7 digits (pid_max is at most 4194304): the names fit IFNAMSIZ. */
    unsigned pid = (unsigned)netns_owner % 10000000u, oct = (unsigned)octet % 256u;

    snprintf(netns_bridge, sizeof(netns_bridge), "%s%ubr", NETNS_PREFIX, pid);
    snprintf(netns_gw, sizeof(netns_gw), "%s.%u.1", NETNS_SUBNET_BASE, oct);
    for (i = 0; i < n; i++) {
        struct netns_host *h = &netns_hosts[i];

        snprintf(h->name, sizeof(h->name), "%.4s", names[i]);
        snprintf(h->ns, sizeof(h->ns), "%s%u-%.4s", NETNS_PREFIX, pid, h->name);
        snprintf(h->veth, sizeof(h->veth), "%s%u%.4s", NETNS_PREFIX, pid, h->name);
        snprintf(h->addr, sizeof(h->addr), "%s.%u.%u", NETNS_SUBNET_BASE, oct,
                 (unsigned)(NETNS_HOST_BASE + i) % 256u);
        netns_undo_add(&k, "netns", "del", h->ns);
    }
    for (i = 0; i < n; i++) {
        netns_undo_add(&k, "link", "del", netns_hosts[i].veth);
    }
    netns_undo_add(&k, "link", "del", netns_bridge);
    netns_nhosts = n;
    /* From here on a signal removes whatever of it exists. */
    netns_nundo = (sig_atomic_t)k;
}

/* The bridge, with the gateway address, not handing frames to iptables.  0 or -1. */
static int
netns_make_bridge(void)
{
    if (netns_run(NULL, "ip link add %s type bridge nf_call_iptables 0", netns_bridge) != 0
        || netns_run(NULL, "ip addr add %s/24 dev %s", netns_gw, netns_bridge) != 0
        || netns_run(NULL, "ip link set %s up", netns_bridge) != 0) {
        return -1;
    }
    return 0;
}

/* Host i's namespace.  0 or -1. */
static int
netns_make_ns(size_t i)
{
    return netns_run(NULL, "ip netns add %s", netns_hosts[i].ns) == 0 ? 0 : -1;
}

/* Host i's veth pair, its address, and both ends up.  0 or -1. */
static int
netns_make_link(size_t i)
{
    const struct netns_host *h = &netns_hosts[i];

    if (netns_run(NULL, "ip link add %s type veth peer name eth0 netns %s", h->veth, h->ns) != 0
        || netns_run(NULL, "ip link set %s master %s", h->veth, netns_bridge) != 0
        || netns_run(NULL, "ip link set %s up", h->veth) != 0
        || netns_run(NULL, "ip -n %s addr add %s/24 dev eth0", h->ns, h->addr) != 0
        || netns_run(NULL, "ip -n %s link set eth0 up", h->ns) != 0
        || netns_run(NULL, "ip -n %s link set lo up", h->ns) != 0) {
        return -1;
    }
    return 0;
}

/* ---- the interface ---- */

int
netns_init(const char *log_path, char *why, size_t size)
{
    static const char *const probe[] = { "p" };
    int octet;

    snprintf(netns_log_path, sizeof(netns_log_path), "%s", log_path);
    netns_owner = getpid();
    if (geteuid() != 0) {
        snprintf(why, size, "not root (namespaces, veth pairs and iptables need root)");
        return -1;
    }
    if (!netns_find("ip", netns_ip, sizeof(netns_ip))) {
        snprintf(why, size, "no `ip` command (package iproute2)");
        return -1;
    }
    if (!netns_find("iptables", netns_ipt, sizeof(netns_ipt))) {
        snprintf(why, size, "no `iptables` command (package iptables)");
        return -1;
    }
    netns_hook();
    netns_remove_leftovers();
    /* The trial: one host, every kind of object, one rule; then undone. */
    octet = 20 + (int)(netns_owner % NETNS_SUBNETS);
    netns_name_hosts(probe, 1, octet);
    if (netns_make_ns(0) != 0) {
        snprintf(why, size, "cannot make a network namespace (`ip netns add` failed; see %s)",
                 log_path);
    } else if (netns_make_bridge() != 0) {
        snprintf(why, size, "cannot make a bridge (`ip link add ... type bridge` failed; "
                 "see %s)", log_path);
    } else if (netns_make_link(0) != 0) {
        snprintf(why, size, "cannot make a veth pair into a namespace (`ip link add ... "
                 "type veth` failed; see %s)", log_path);
    } else if (netns_iptables(0, "-A INPUT -m statistic --mode random --probability 0.05 "
                              "-j DROP") != 0) {
        snprintf(why, size, "iptables cannot add a rule with the statistic match inside a "
                 "namespace (see %s)", log_path);
    } else {
        netns_down();
        return 0;
    }
    netns_down();
    return -1;
}

int
netns_up(const char *const *names, size_t n)
{
    int octet, tries;
    size_t i;

    if (n == 0 || n > NETNS_HOSTS_MAX || netns_ip[0] == '\0' || netns_nundo != 0) {
        netns_logf("netns_up: %zu hosts, or no init, or a topology is up", n);
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (strlen(names[i]) > NETNS_HOST_NAME_MAX || !isalpha((unsigned char)names[i][0])) {
            netns_logf("netns_up: bad host name '%s'", names[i]);
            return -1;
        }
    }
    /* A /24 that nothing on the machine routes, another run's bridge included. */
    octet = 20 + (int)(netns_owner % NETNS_SUBNETS);
    for (tries = 0; tries < NETNS_SUBNETS && netns_subnet_taken(octet); tries++) {
        octet = 20 + (octet - 20 + 1) % NETNS_SUBNETS;
    }
    if (tries == NETNS_SUBNETS) {
        netns_logf("netns_up: every subnet %s.20-219.0/24 is routed already",
                   NETNS_SUBNET_BASE);
        return -1;
    }
    netns_name_hosts(names, n, octet);
    if (netns_make_bridge() != 0) {
        netns_down();
        return -1;
    }
    for (i = 0; i < n; i++) {
        if (netns_make_ns(i) != 0 || netns_make_link(i) != 0) {
            netns_down();
            return -1;
        }
    }
    netns_logf("netns_up: %zu hosts on %s.%d.0/24", n, NETNS_SUBNET_BASE, octet);
    return 0;
}

void
netns_down(void)
{
    sigset_t all, old;

    if (netns_nundo == 0) {
        return;
    }
    /* Not twice at once: a signal now would find nothing left to do. */
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    netns_logf("netns_down: removing %s* of this run", NETNS_PREFIX);
    netns_undo_run();
    sigprocmask(SIG_SETMASK, &old, NULL);
    netns_nhosts = 0;
    netns_bridge[0] = '\0';
}

void
netns_adopt(void)
{
    netns_owner = getpid();
    netns_nundo = 0;
    netns_nhosts = 0;
    netns_bridge[0] = '\0';
    netns_hooked = false;
    netns_hook();
}

void
netns_sweep(void)
{
    if (netns_ip[0] != '\0') {
        netns_remove_leftovers();
    }
}

const char *
netns_name(size_t i)
{
    return i < netns_nhosts ? netns_hosts[i].ns : "";
}

const char *
netns_addr(size_t i)
{
    return i < netns_nhosts ? netns_hosts[i].addr : "";
}

const char *
netns_gateway(void)
{
    return netns_nhosts > 0 ? netns_gw : "";
}

int
netns_iptables(size_t i, const char *args)
{
    if (i >= netns_nhosts) {
        return -1;
    }
    return netns_run(netns_hosts[i].ns, "iptables -w %s", args) == 0 ? 0 : -1;
}

int
netns_heal(size_t i)
{
    return netns_iptables(i, "-F");
}
