/* shell-10k: a user program of about 10,000 instructions, entry to exit (static, no libc, no
 * PIE), for bochs:shell's figure: from the guest shell's prompt to its decoded trace. */
__attribute__((noinline)) static unsigned long shell_10k_work(unsigned long n)
{
    unsigned long h = 0;
    for (unsigned long i = 0; i < n; i++)
        h = h * 31 + i;
    return h;
}

void _start(void);
__attribute__((noreturn)) void _start(void)
{
    /* 1,430 rounds of a 7-instruction loop (gcc -O1): 10,010 instructions and a few more */
    unsigned long h = shell_10k_work(1430);
    __asm__ volatile("" ::"r"(h));                 /* the work is kept */
    __asm__ volatile("syscall" ::"a"(60), "D"(0)); /* exit(0) */
    __builtin_unreachable();
}
