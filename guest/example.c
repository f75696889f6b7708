/* example: a small dynamic program to trace in the guest (README "Tracing your own programs";
 * bochs:user-run builds it on the host and runs it in the guest under `ptvisor-ctl trace`).
 * Its own work is in example_* functions, and it calls into libc (qsort, printf), so a decoded
 * trace shows the program, its shared libraries and the dynamic loader by name. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) static int example_compare(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

__attribute__((noinline)) static unsigned example_checksum(const int *v, int n)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < n; i++)
        h = (h ^ (unsigned)v[i]) * 16777619u;
    return h;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    if (n < 1 || n > 100000)
        n = 200;
    int *v = malloc(sizeof(*v) * (size_t)n);
    if (!v)
        return 1;
    for (int i = 0; i < n; i++)
        v[i] = (int)((i * 7919u) % (unsigned)n);
    qsort(v, (size_t)n, sizeof(*v), example_compare);
    printf("example: %d numbers sorted, checksum %08x\n", n, example_checksum(v, n));
    free(v);
    return 0;
}
