/* Running code that must exit (RP_CHECK / RP_FATAL) in a child process, its stderr captured, so a
 * test can check the refusal: exit status 1 and the message, not a signal. Fork before the parent
 * runs any OpenMP parallel region: libgomp's threads do not survive a fork. */
#pragma once
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int status;     /* waitpid's; -1 if the pipe could not be made */
    char err[1024]; /* the child's stderr, trailing newlines dropped, truncated to fit */
} ChildResult;

/* fn(arg) in a child whose stderr goes to r->err; the child exits 0 if fn returns. */
static inline ChildResult child_run(void (*fn)(const void *), const void *arg) {
    ChildResult r = {-1, ""};
    int fds[2];
    if (pipe(fds) != 0)
        return r;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn(arg);
        _exit(0);
    }
    close(fds[1]);
    size_t used = 0;
    ssize_t got;
    while (used + 1 < sizeof r.err && (got = read(fds[0], r.err + used, sizeof r.err - used - 1)) > 0)
        used += (size_t)got;
    while (used > 0 && r.err[used - 1] == '\n')
        used--;
    r.err[used] = '\0';
    close(fds[0]);
    waitpid(pid, &r.status, 0);
    return r;
}

/* 1 if the child exited with status 1 and `message` is in its stderr; otherwise 0, and `why`
 * (": expected ..., got ...") says what it did instead. */
static inline int child_refused(const ChildResult *r, const char *message, char *why, size_t size) {
    why[0] = '\0';
    if (r->status != -1 && WIFEXITED(r->status) && WEXITSTATUS(r->status) == 1 && strstr(r->err, message))
        return 1;
    if (r->status == -1)
        snprintf(why, size, ": no pipe for the child");
    else
        snprintf(why, size, ": expected exit status 1 and '%s', got %s %d and '%s'", message,
                 WIFEXITED(r->status) ? "exit status" : "signal",
                 WIFEXITED(r->status) ? WEXITSTATUS(r->status) : WTERMSIG(r->status), r->err);
    return 0;
}
