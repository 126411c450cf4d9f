/*
 * run_bench.c: the driver of `make bench` and `make bench-smoke`
 * (build/run_bench).
 *
 * Starts five redis-server masters and one redlockd on free ports with
 * the test harness (tests/harness.h), runs build/redlock-bench for each
 * entry of the standard table (rtt; uncontended with 1 and 64
 * connections; hot with 50; direct with 64 loops), collects the JSON
 * line of each run, and prints a table and the ratios of issue 6 with
 * their targets.  The targets are reported, never enforced.
 *
 *     run_bench            BENCH_SECONDS per mode (default 10)
 *     run_bench --smoke    1 s per mode; exit 1 unless every mode printed
 *                          a JSON line with pairs > 0 and errors == 0
 *
 * Environment: BENCH_SECONDS, REDLOCKD_BIN (default ./build/redlockd),
 * REDLOCK_BENCH_BIN (default ./build/redlock-bench), BENCH_UNIX=1 (talk
 * to the daemon over its Unix socket instead of TCP).  Exit status: 0,
 * or 1 when the setup failed, a run printed no JSON line, or (smoke) a
 * run had no pairs or any error.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "tests/harness.h"

#define RUNBENCH_LINE_MAX   1024    /* a JSON line */
#define RUNBENCH_MASTERS    5       /* the reference setup */

/* One entry of the standard table and what its run printed. */
struct runbench_run {
    const char *label;                  /* row label */
    const char *mode;                   /* --mode */
    int         conns;                  /* --connections */
    bool        ok;                     /* a JSON line was read */
    char        json[RUNBENCH_LINE_MAX]; /* that line */
    double      pairs;                  /* "pairs" */
    double      pps;                    /* "pairs_per_s" */
    double      p50, p90, p99, max;     /* latencies, us */
    double      errors;                 /* "errors" */
    double      min_acq, max_acq;       /* hot only; -1 otherwise */
};

static struct runbench_run runbench_runs[] = {
    { "rtt", "rtt", 1, false, "", 0, 0, 0, 0, 0, 0, 0, -1, -1 },
    { "uncontended-1", "uncontended", 1, false, "", 0, 0, 0, 0, 0, 0, 0, -1, -1 },
    { "uncontended-64", "uncontended", 64, false, "", 0, 0, 0, 0, 0, 0, 0, -1, -1 },
    { "hot-50", "hot", 50, false, "", 0, 0, 0, 0, 0, 0, 0, -1, -1 },
    { "direct-64", "direct", 64, false, "", 0, 0, 0, 0, 0, 0, 0, -1, -1 },
};

#define RUNBENCH_NRUNS  (sizeof(runbench_runs) / sizeof(runbench_runs[0]))

enum {
    RUNBENCH_RTT,
    RUNBENCH_UNC1,
    RUNBENCH_UNC64,
    RUNBENCH_HOT50,
    RUNBENCH_DIRECT
};

/* The number after "\"key\":" in a JSON line; -1 when absent. */
static double
runbench_field(const char *json, const char *key)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(json, pat);
    if (p == NULL) {
        return -1;
    }
    return strtod(p + strlen(pat), NULL);
}

/* Find the JSON line in out_path (stdout and stderr of the run). */
static bool
runbench_read_json(const char *out_path, char *json, size_t size)
{
    char line[RUNBENCH_LINE_MAX];
    bool found = false;
    FILE *f = fopen(out_path, "r");

    if (f == NULL) {
        fprintf(stderr, "run_bench: %s: %s\n", out_path, strerror(errno));
        return false;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "{\"mode\":", 8) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(json, size, "%s", line);
            found = true;
        } else {
            fprintf(stderr, "  (bench) %s", line);
        }
    }
    fclose(f);
    return found;
}

static void
runbench_one(struct runbench_run *r, const char *bin, const char *seconds,
             const char *target, const char *masters)
{
    char conns[16], out[4096];
    const char *argv[16];
    size_t n = 0;
    int status = 0, code;
    pid_t pid;

    snprintf(conns, sizeof(conns), "%d", r->conns);
    snprintf(out, sizeof(out), "%s/bench-%s.out", h_dir(), r->label);
    argv[n++] = bin;
    argv[n++] = "--mode";
    argv[n++] = r->mode;
    argv[n++] = "--connections";
    argv[n++] = conns;
    argv[n++] = "--duration";
    argv[n++] = seconds;
    argv[n++] = "--target";
    argv[n++] = target;
    argv[n++] = "--masters";
    argv[n++] = masters;
    argv[n] = NULL;
    fprintf(stderr, "run_bench: %s (%s s)\n", r->label, seconds);
    pid = h_spawn(argv, out);
    if (pid < 0) {
        return;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "run_bench: waitpid: %s\n", strerror(errno));
            return;
        }
    }
    code = h_decode_status(status);
    r->ok = runbench_read_json(out, r->json, sizeof(r->json));
    if (code != 0 || !r->ok) {
        fprintf(stderr, "run_bench: %s: redlock-bench exited with %d%s\n", r->label, code,
                r->ok ? "" : " and printed no result");
        r->ok = false;
        return;
    }
    printf("%s\n", r->json);
    r->pairs = runbench_field(r->json, "pairs");
    r->pps = runbench_field(r->json, "pairs_per_s");
    r->p50 = runbench_field(r->json, "p50_us");
    r->p90 = runbench_field(r->json, "p90_us");
    r->p99 = runbench_field(r->json, "p99_us");
    r->max = runbench_field(r->json, "max_us");
    r->errors = runbench_field(r->json, "errors");
    r->min_acq = runbench_field(r->json, "min_acq");
    r->max_acq = runbench_field(r->json, "max_acq");
}

/* One ratio row: value, target, and whether it is met. */
static void
runbench_ratio(const char *what, bool have, double num, double den, bool at_most,
               double target)
{
    double v;

    if (!have || den <= 0) {
        printf("  %-44s %10s   %s %.1f   %s\n", what, "n/a", at_most ? "<=" : ">=", target,
               "no data");
        return;
    }
    v = num / den;
    printf("  %-44s %10.2f   %s %.1f   %s\n", what, v, at_most ? "<=" : ">=", target,
           (at_most ? v <= target : v >= target) ? "met" : "MISSED");
}

static void
runbench_table(const char *seconds)
{
    const struct runbench_run *rtt = &runbench_runs[RUNBENCH_RTT];
    const struct runbench_run *u1 = &runbench_runs[RUNBENCH_UNC1];
    const struct runbench_run *u64 = &runbench_runs[RUNBENCH_UNC64];
    const struct runbench_run *hot = &runbench_runs[RUNBENCH_HOT50];
    const struct runbench_run *dir = &runbench_runs[RUNBENCH_DIRECT];
    size_t i;

    printf("\nredlock-bench, %s s per mode, %d masters (latencies: acquire, us)\n",
           seconds, RUNBENCH_MASTERS);
    printf("  %-16s %5s %10s %8s %8s %8s %9s %7s %13s\n", "run", "conns", "pairs/s",
           "p50", "p90", "p99", "max", "errors", "acq min/max");
    for (i = 0; i < RUNBENCH_NRUNS; i++) {
        const struct runbench_run *r = &runbench_runs[i];

        if (!r->ok) {
            printf("  %-16s %5d %10s\n", r->label, r->conns, "(failed)");
            continue;
        }
        printf("  %-16s %5d %10.0f %8.0f %8.0f %8.0f %9.0f %7.0f", r->label, r->conns,
               r->pps, r->p50, r->p90, r->p99, r->max, r->errors);
        if (r->min_acq >= 0) {
            printf(" %6.0f/%-6.0f", r->min_acq, r->max_acq);
        }
        printf("\n");
    }
    printf("\nratios (report only)%34s   target\n", "value");
    runbench_ratio("uncontended-1 p50 / rtt p50", u1->ok && rtt->ok, u1->p50, rtt->p50,
                   true, 2.0);
    runbench_ratio("uncontended-64 pairs/s / direct pairs/s", u64->ok && dir->ok, u64->pps,
                   dir->pps, false, 0.5);
    runbench_ratio("hot-50 pairs/s / uncontended-1 pairs/s", hot->ok && u1->ok, hot->pps,
                   u1->pps, false, 0.8);
    runbench_ratio("hot-50 fairness min/max acquisitions", hot->ok && hot->max_acq > 0,
                   hot->min_acq, hot->max_acq, false, 0.7);
}

int
main(int argc, char **argv)
{
    struct h_daemon_opts o;
    const char *bin = getenv("REDLOCK_BENCH_BIN"), *env = getenv("BENCH_SECONDS");
    const char *unix_env = getenv("BENCH_UNIX");
    char masters[H_MASTERS_MAX * 24], target[4096], seconds[32];
    bool smoke = false, good = true;
    size_t i, len = 0;

    if (argc == 2 && strcmp(argv[1], "--smoke") == 0) {
        smoke = true;
    } else if (argc != 1) {
        fprintf(stderr, "usage: run_bench [--smoke]   (environment: BENCH_SECONDS, "
                "REDLOCKD_BIN, REDLOCK_BENCH_BIN, BENCH_UNIX)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (bin == NULL || bin[0] == '\0') {
        bin = "./build/redlock-bench";
    }
    snprintf(seconds, sizeof(seconds), "%s",
             smoke ? "1" : env != NULL && atof(env) > 0 ? env : "10");
    if (h_suite_init() != 0) {
        return 1;
    }
    memset(&o, 0, sizeof(o));
    o.log_level = "warn";
    if (h_begin("bench") != 0 || h_start_masters(RUNBENCH_MASTERS) != 0
        || h_start_daemon(&o) != 0) {
        fprintf(stderr, "run_bench: could not start the masters and the daemon\n");
        h_suite_cleanup();
        return 1;
    }
    for (i = 0; i < RUNBENCH_MASTERS; i++) {
        len += (size_t)snprintf(masters + len, sizeof(masters) - len, "%s127.0.0.1:%d",
                                i > 0 ? "," : "", h_master_port(i));
    }
    if (unix_env != NULL && strcmp(unix_env, "1") == 0) {
        snprintf(target, sizeof(target), "%s", h_daemon_unix_path());
    } else {
        snprintf(target, sizeof(target), "127.0.0.1:%d", h_daemon_port());
    }
    for (i = 0; i < RUNBENCH_NRUNS; i++) {
        runbench_one(&runbench_runs[i], bin, seconds, target, masters);
        if (!runbench_runs[i].ok) {
            good = false;
        } else if (smoke && (runbench_runs[i].pairs <= 0 || runbench_runs[i].errors != 0)) {
            fprintf(stderr, "run_bench: smoke: %s: pairs %.0f, errors %.0f\n",
                    runbench_runs[i].label, runbench_runs[i].pairs, runbench_runs[i].errors);
            good = false;
        }
    }
    if (!good) {
        h_print_daemon_log_tail(20);
    }
    h_end();
    h_suite_cleanup();
    runbench_table(seconds);
    if (smoke) {
        printf("\nbench-smoke: %s\n", good ? "every mode ran, with pairs and no errors"
                                         : "FAILED");
    }
    return good ? 0 : 1;
}
