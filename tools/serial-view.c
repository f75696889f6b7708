/* serial-view: a ptvisor serial console for a person (make shell, tools/shell.sh).
 *
 *   serial-view <LOG-STREAM >TERMINAL
 *
 * Copies standard input to standard output as it comes, without the frame lines of trace dumps
 * ("@PTV1 ..." at the start of a line, docs/serial-protocol.md): the host decodes those, a person
 * needs not read them. Everything else passes unchanged and at once -- a shell prompt has no
 * newline after it -- except the first bytes of a line while they could still begin a frame
 * line (at most 5, held until the next byte says which). Exit 0 at end of input. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

static const char prefix[] = "@PTV1 ";
#define PREFIX_LEN (sizeof(prefix) - 1)

enum state { LINE_START, IN_LINE, DROP };

struct view {
    enum state st;
    size_t held; /* bytes of prefix matched at a line start */
};

/* one byte of input; what to show goes to out (at most PREFIX_LEN + 1 bytes per call) */
static size_t view_byte(struct view *v, char c, char *out)
{
    size_t n = 0;
    switch (v->st) {
    case DROP:
        if (c == '\n')
            v->st = LINE_START;
        return 0;
    case LINE_START:
        if (c == prefix[v->held]) {
            if (++v->held == PREFIX_LEN) {
                v->held = 0;
                v->st = DROP;
            }
            return 0;
        }
        memcpy(out, prefix, v->held);
        n = v->held;
        v->held = 0;
        /* the byte that ended the match may itself start a new line or a prefix */
        if (c == '\n') {
            out[n++] = c;
            return n;
        }
        v->st = IN_LINE;
        out[n++] = c;
        return n;
    case IN_LINE:
        out[n++] = c;
        if (c == '\n')
            v->st = LINE_START;
        return n;
    }
    return 0;
}

static int write_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(STDOUT_FILENO, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int main(void)
{
    struct view v = {LINE_START, 0};
    char in[4096], out[sizeof(in) * (PREFIX_LEN + 1)];
    for (;;) {
        ssize_t r = read(STDIN_FILENO, in, sizeof(in));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0;
        size_t n = 0;
        for (ssize_t i = 0; i < r; i++)
            n += view_byte(&v, in[i], out + n);
        if (write_all(out, n) < 0)
            return 1;
    }
}
