/*
 * netns.h: a small network of Linux network namespaces for the fault
 * suite's network scenarios (tests/faults/README.md, "Network faults").
 *
 * One topology at a time: a bridge in the caller's (root) namespace
 * with the first address of a private /24, and one namespace per host,
 * each joined to the bridge by a veth pair (the root end is a port of
 * the bridge, the other end is "eth0" inside the namespace, with the
 * host's address).  Processes in the root namespace reach every host
 * through the bridge, and the hosts reach each other; the bridge does
 * not hand its frames to the root namespace's iptables
 * (nf_call_iptables 0), so only the rules made here, inside the hosts'
 * namespaces, drop anything, and they vanish with the namespaces.
 *
 * Names carry a prefix and the pid of the suite, so that two runs on
 * one machine do not collide and the leftovers of a run that was killed
 * (its pid is gone) can be told apart and removed:
 *
 *     namespace   rlft<pid>-<host>      (ip netns list)
 *     veth        rlft<pid><host>       (root end; "eth0" inside)
 *     bridge      rlft<pid>br
 *
 * The subnet is 10.231.<n>.0/24 with the first <n> (from the pid on)
 * that no route of the machine overlaps; the bridge is .1 and host i is
 * .(10 + i).
 *
 * Everything is torn down by netns_down(), at exit (atexit), and on
 * SIGINT, SIGTERM and SIGHUP (a handler that runs the prepared `ip`
 * commands with fork and execve only, then lets the signal end the
 * process); a process that was killed leaves its topology to
 * netns_sweep() or to the next netns_init().  Commands and their errors go to the log named at
 * netns_init().
 *
 * Functions return 0 / -1; a failure is described in the log.
 */
#ifndef REDLOCKD_TESTS_FAULTS_NETNS_H
#define REDLOCKD_TESTS_FAULTS_NETNS_H

#include <stdbool.h>
#include <stddef.h>

#define NETNS_PREFIX        "rlft"  /* every name made here begins with it */
#define NETNS_HOSTS_MAX     12      /* hosts of one topology */
#define NETNS_HOST_NAME_MAX 4       /* a host's short name, "m0", "d1" (NUL excluded) */
#define NETNS_ADDR_MAX      16      /* a dotted IPv4 address, NUL included */

/*
 * Once, before any other call: remember log_path (commands' output
 * goes there), find `ip` and `iptables`, remove the leftovers of
 * earlier runs whose pid is dead, and try what the topology needs (be
 * root, make a namespace, a bridge, a veth pair, an iptables rule with
 * the statistic match inside the namespace), undoing the trial.
 * Returns 0, or -1 with one line in why saying what is missing.
 */
int netns_init(const char *log_path, char *why, size_t size);

/*
 * Make the topology: a bridge and one namespace per name in names[0..n)
 * (at most NETNS_HOSTS_MAX, each at most NETNS_HOST_NAME_MAX letters or
 * digits).  Returns 0, or -1 (what was made is removed again).
 */
int netns_up(const char *const *names, size_t n);

/* Remove the topology (namespaces, veth pairs, bridge).  Safe when there is none. */
void netns_down(void);

/*
 * In a child process that makes the topologies from now on (the suite
 * runs each scenario in a process of its own): the names carry its pid,
 * and its SIGINT, SIGTERM, SIGHUP and exit remove what it made.
 */
void netns_adopt(void);

/*
 * Remove the namespaces and links of runs whose process is gone (such as
 * a child killed before it could remove its topology).  Nothing before
 * netns_init() found `ip`.
 */
void netns_sweep(void);

/* The namespace of host i ("rlft<pid>-<name>"), "" when there is no such host. */
const char *netns_name(size_t i);

/* The address of host i, "" when there is no such host. */
const char *netns_addr(size_t i);

/* The bridge's address in the root namespace (the hosts see the suite from it). */
const char *netns_gateway(void);

/*
 * Run `iptables -w <args>` inside host i's namespace; args is split at
 * spaces ("-A INPUT -s 10.231.7.20 -j DROP").  Returns 0 when it
 * exited with 0.
 */
int netns_iptables(size_t i, const char *args);

/* Remove every rule made in host i's namespace (iptables -F).  0 or -1. */
int netns_heal(size_t i);

#endif /* REDLOCKD_TESTS_FAULTS_NETNS_H */
