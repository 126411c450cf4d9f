/*
 * replay.c: run a libFuzzer target's LLVMFuzzerTestOneInput() over saved
 * inputs, without libFuzzer.
 *
 * Linked with one target (fuzz_proto.c or fuzz_conf.c) and its module,
 * and built with the ordinary compiler and flags, so that the seed
 * corpus and every regression input are checked by the normal test run
 * (under sanitizers too with SANITIZE=).  A target reports a broken
 * invariant by aborting; the name of the input being run is then
 * printed before the process dies.
 *
 *     fuzz-replay-proto [-v] [PATH...]
 *
 * Each PATH is a file or a directory whose regular files (not those
 * starting with '.') are run in name order.  Without PATHs the program
 * runs tests/fuzz/corpus/<target> and tests/fuzz/regress/<target>
 * relative to the working directory, <target> being what follows
 * "fuzz-replay-" in its own name; a missing regress directory is then
 * skipped.  -v prints each input's name before it runs.  Exit 0 when
 * every input ran, 1 when a path could not be read or nothing was found
 * (a broken invariant or a sanitizer report ends the process earlier).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_PATH_MAX     4096

/* The input being run, for the fatal signal handler. */
static char replay_current[REPLAY_PATH_MAX];

/* Inputs run so far. */
static size_t replay_count;

/* -v: print each input's name before running it. */
static int replay_verbose;

/* On a fatal signal: name the input, then die by the same signal. */
static void
replay_signal_cb(int sig)
{
    static const char head[] = "replay: died while running ";
    ssize_t rc;

    rc = write(STDERR_FILENO, head, sizeof(head) - 1);
    rc = write(STDERR_FILENO, replay_current, strlen(replay_current));
    rc = write(STDERR_FILENO, "\n", 1);
    (void)rc;
    signal(sig, SIG_DFL);
    raise(sig);
}

/*
 * Name the input on SIGABRT (a broken invariant, a sanitizer report with
 * abort_on_error) and on the other deadly signals unless a sanitizer
 * already handles them (its report is worth more than a name).
 */
static void
replay_catch_signals(void)
{
    static const int sigs[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
    struct sigaction sa, old;
    size_t i;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = replay_signal_cb;
    sa.sa_flags = (int)SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        if (sigaction(sigs[i], NULL, &old) == 0 &&
            (sigs[i] == SIGABRT || old.sa_handler == SIG_DFL)) {
            sigaction(sigs[i], &sa, NULL);
        }
    }
}

/*
 * Read the whole file into an exact-size buffer (so that a sanitizer
 * sees any read past its end).  Returns 0, or -1 after a message.
 */
static int
replay_read(const char *path, uint8_t **datap, size_t *sizep)
{
    FILE *f;
    uint8_t *data = NULL, *bigger;
    size_t size = 0, cap = 0, n;

    f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (;;) {
        if (size == cap) {
            cap = cap == 0 ? 4096 : cap * 2;
            bigger = realloc(data, cap);
            if (bigger == NULL) {
                fprintf(stderr, "replay: %s: out of memory\n", path);
                goto fail;
            }
            data = bigger;
        }
        n = fread(data + size, 1, cap - size, f);
        size += n;
        if (n == 0) {
            break;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        goto fail;
    }
    fclose(f);

    /* Exact size; malloc(0) may return NULL, so keep one byte then. */
    bigger = malloc(size > 0 ? size : 1);
    if (bigger == NULL) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        free(data);
        return -1;
    }
    if (size > 0) {
        memcpy(bigger, data, size);
    }
    free(data);
    *datap = bigger;
    *sizep = size;
    return 0;

fail:
    fclose(f);
    free(data);
    return -1;
}

/* Run one file through the target. */
static int
replay_file(const char *path)
{
    uint8_t *data;
    size_t size;

    if (replay_read(path, &data, &size) != 0) {
        return -1;
    }
    snprintf(replay_current, sizeof(replay_current), "%s", path);
    if (replay_verbose) {
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
    }
    LLVMFuzzerTestOneInput(data, size);
    replay_current[0] = '\0';
    free(data);
    replay_count++;
    return 0;
}

/* Skip names starting with '.', the way libFuzzer does. */
static int
replay_visible(const struct dirent *de)
{
    return de->d_name[0] != '.';
}

/* Run every regular file of dir, in name order. */
static int
replay_dir(const char *dir)
{
    struct dirent **names;
    struct stat st;
    char path[REPLAY_PATH_MAX];
    int i, n, rc = 0;

    n = scandir(dir, &names, replay_visible, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    for (i = 0; i < n; i++) {
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name)
            >= sizeof(path)) {
            fprintf(stderr, "replay: %s/%s: path too long\n", dir, names[i]->d_name);
            rc = -1;
        } else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) != 0) {
                rc = -1;
            }
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

/* Run a file, or every file in a directory. */
static int
replay_path(const char *path)
{
    struct stat st;

    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    return S_ISDIR(st.st_mode) ? replay_dir(path) : replay_file(path);
}

/* No PATHs: the target's corpus and (when present) regress directories. */
static int
replay_defaults(const char *argv0)
{
    static const char marker[] = "fuzz-replay-";
    const char *target = strstr(argv0, marker);
    char dir[REPLAY_PATH_MAX];
    struct stat st;
    int rc = 0;

    if (target == NULL || target[sizeof(marker) - 1] == '\0') {
        fprintf(stderr, "usage: fuzz-replay-<target> [-v] [PATH...]\n");
        return -1;
    }
    target += sizeof(marker) - 1;

    snprintf(dir, sizeof(dir), "tests/fuzz/corpus/%s", target);
    if (replay_path(dir) != 0) {
        rc = -1;
    }
    snprintf(dir, sizeof(dir), "tests/fuzz/regress/%s", target);
    if (stat(dir, &st) == 0 && replay_path(dir) != 0) {
        rc = -1;
    }
    return rc;
}

int
main(int argc, char **argv)
{
    const char *name = strrchr(argv[0], '/') != NULL ? strrchr(argv[0], '/') + 1 : argv[0];
    int i = 1, rc = 0;

    replay_catch_signals();
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        replay_verbose = 1;
        i++;
    }
    if (i == argc) {
        rc = replay_defaults(name);
    }
    for (; i < argc; i++) {
        if (replay_path(argv[i]) != 0) {
            rc = -1;
        }
    }
    if (rc == 0 && replay_count == 0) {
        fprintf(stderr, "%s: no inputs found\n", name);
        rc = -1;
    }
    printf("%s: %zu inputs replayed%s\n", name, replay_count, rc == 0 ? "" : ", with errors");
    return rc == 0 ? 0 : 1;
}
