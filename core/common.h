/* Error handling, logging and small allocation helpers shared by every module. */
#pragma once
#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Print "realpos: error: ..." and end the process (rp_fatal_exit). Every bad input ends here with
 * a message that names the file, key or dataset and what was expected. */
#define RP_FATAL(...)                                                                              \
    do {                                                                                           \
        fflush(stdout);                                                                            \
        fprintf(stderr, "realpos: error: ");                                                       \
        fprintf(stderr, __VA_ARGS__);                                                              \
        fputc('\n', stderr);                                                                       \
        rp_fatal_exit();                                                                           \
    } while (0)

#define RP_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            RP_FATAL(__VA_ARGS__);                                                                 \
    } while (0)

/* How this process ends a fatal error and whether it logs. core knows nothing of the job it runs
 * in: whoever starts a job of several processes installs the hooks once, at start-up (dist_init:
 * MPI_Abort, so that one rank's error stops every rank instead of leaving them waiting in a
 * collective; quiet logs on ranks other than 0, so rank 0 alone reports), and resets them to the
 * default ({NULL, 0}: exit(1), every line logged) when the job ends. The hooks are the one piece
 * of process-wide mutable state of core: a fatal error can happen anywhere, far from any object
 * that could carry them. */
typedef struct {
    void (*abort_job)(void); /* called after the message; exit(1) follows if it returns */
    int quiet_log;           /* rp_log drops its lines */
} JobHooks;
void rp_install_job_hooks(JobHooks hooks);
/* The installed quiet_log: nonzero where rp_log prints nothing (for output beside rp_log's). */
int rp_log_quiet(void);
/* The end of RP_FATAL: flush stdout and stderr, the job's abort_job if installed, exit(1). */
_Noreturn void rp_fatal_exit(void);

/* Informational log line on stderr, prefixed with the wall-clock time (none while quiet_log). */
void rp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

void *xmalloc(size_t bytes);
void *xcalloc(size_t count, size_t size);
char *xstrdup(const char *s);
/* 64-byte aligned allocation (free with free()); contents zeroed; a block of 2 MiB or more on
 * transparent huge pages where the kernel allows them (common.c). */
float *xalloc_floats(size_t count);
/* The same; out of memory names `what` (the config keys that set the size) and the size. */
float *xalloc_floats_for(size_t count, const char *what);
/* The same on 4 KiB pages: for blocks freed soon after (the peak probes' operands), which on huge
 * pages would stay resident in malloc's heap after free. */
float *xalloc_floats_transient(size_t count, const char *what);
/* x[0, count) = 0, each OpenMP thread clearing one contiguous part (one thread's memset reaches
 * about half the memory bandwidth of two: 3.9 against 2.2 ms for bert-mini's 11 M gradients). */
void zero_floats(float *x, size_t count);

/* Whether a parallel region of `threads` threads is worth opening: more than one thread, or inside
 * another region. The end of a region costs a futex wake even in a team of one (~1.5 us on a KVM
 * guest: 5% of a width-64 model's step at one thread, ~100 regions). Without one, the caller runs
 * the region's body itself at the outermost level, where omp_get_thread_num() is 0, omp_get_num_threads()
 * 1 and an orphaned `omp for` runs every iteration: as in a team of one. Inside a region a nested
 * team of one is kept, since there a body reading thread numbers would read the outer team's. */
int omp_region_worthwhile(int threads);

/* Runs `call`, a call of a function whose loops are orphaned `omp for`s, in a team of
 * omp_get_max_threads() threads where omp_region_worthwhile says so, else on the calling thread
 * alone: one body either way (make it noinline so that no second copy is compiled), so the same bits. */
#define OMP_TEAM_OR_ALONE(call)                                   \
    do {                                                          \
        if (omp_region_worthwhile(omp_get_max_threads())) {       \
            _Pragma("omp parallel") call;                         \
        } else {                                                  \
            call;                                                 \
        }                                                         \
    } while (0)

/* The shortest %g text that reads back as the same float (at most 9 significant digits): the
 * one float formatter of configs and file attributes. */
void format_float(char *out, size_t size, float v);

/* The one reading of a number in configs and the environment: a finite decimal filling all of
 * `text` ("3e-4", "-2.5", ".5"): no leading space, no hexadecimal, inf or nan. Returns 1 with
 * *out set, 0 (and *out untouched) for any other text or a value outside double's range. */
int parse_decimal(const char *text, double *out);

/* The one reading of a switch, for environment switches and boolean config values alike: 1/0,
 * yes/no, true/false, on/off in any case. Returns 1 with *on set, 0 (and *on untouched) for any
 * other text. SWITCH_VALUES names them in messages. */
int parse_switch(const char *text, int *on);
#define SWITCH_VALUES "1/0, yes/no, true/false or on/off (any case)"
/* Environment switch `name` (parse_switch): unset or empty gives `fallback`; any other value than
 * the accepted ones is fatal, naming the variable, its value and SWITCH_VALUES. */
int env_switch(const char *name, int fallback);

/* names[value] of a NULL-terminated list of enum value names; "?" when value is out of range. */
const char *enum_name(const char *const *names, int value);

/* Seconds since an arbitrary monotonic origin. */
double now_seconds(void);

/* CPU seconds used by this process so far, all threads together. */
double cpu_seconds(void);

/* Loops written once and compiled twice, for the build's portable target and for AVX-512 by this
 * function attribute (GELU's passes, the layer norm's backward column pass, AdamW's update), and
 * whether the CPU has the subsets the second form is compiled for (F, BW, DQ, VL). */
#define AVX512_LOOPS __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,prefer-vector-width=512")))
int cpu_has_avx512_loops(void);
