/*
 * fdbudget.c: the client slots a descriptor limit leaves, and the
 * descriptors open now (fdbudget.h).
 */
#include <dirent.h>
#include <errno.h>

#include "daemon/fdbudget.h"

size_t
fdbudget_other(const struct fdbudget_need *need)
{
    return FDBUDGET_BASE + FDBUDGET_PER_MASTER * need->nmasters + need->listeners
           + need->metrics_conns + FDBUDGET_TRANSIENT + FDBUDGET_SPARE;
}

size_t
fdbudget_slots(uint64_t limit, size_t max_clients, const struct fdbudget_need *need)
{
    uint64_t other = fdbudget_other(need);
    uint64_t left = limit > other ? limit - other : 0;
    size_t slots = max_clients > 0 ? max_clients : 1;

    if (limit != FDBUDGET_UNLIMITED && left < slots) {
        slots = left > 0 ? (size_t)left : 1;
    }
    return slots;
}

size_t
fdbudget_net_slots(size_t slots, size_t reserved, bool unix_listens)
{
    if (!unix_listens || slots == 0) {
        return slots;
    }
    return slots - (reserved < slots ? reserved : slots - 1);
}

int64_t
fdbudget_open(int64_t limit)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    int64_t n = 0;

    if (dir == NULL) {
        return errno == EMFILE || errno == ENFILE ? limit : -1;
    }
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(dir);
    return n > 0 ? n - 1 : 0;
}
