/* realpos: a training framework for BERT-style encoders with relative position embeddings and
 * residual attention. Subcommand dispatch (the command table is commands.c), --help, --version. */
#include <cblas.h>
#include <hdf5.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "optim/dist.h"
#include "train/cli/commands.h"

#ifndef REALPOS_GIT_COMMIT /* the Makefile passes `git describe --always --dirty` */
#define REALPOS_GIT_COMMIT "unknown"
#endif
#define REALPOS_VERSION "0.1"

/* In the sanitizer build (make sanitize) LeakSanitizer checks for leaks when a command returns;
 * the leaks of error exits (RP_FATAL) are left to the OS. NULL in ordinary builds. */
void __lsan_do_leak_check(void) __attribute__((weak));

static void print_version(void) {
    static const char *const parallel[] = {"sequential", "pthreads", "OpenMP"};
    int model = openblas_get_parallel();
    unsigned major, minor, release;
    H5get_libversion(&major, &minor, &release);
    printf("realpos %s (git commit %s)\n", REALPOS_VERSION, REALPOS_GIT_COMMIT);
    printf("OpenBLAS: %s; core %s; threading %s\n", openblas_get_config(), openblas_get_corename(),
           model >= 0 && model <= 2 ? parallel[model] : "unknown");
    printf("HDF5 %u.%u.%u\n", major, minor, release);
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    printf("OpenMP: OMP_WAIT_POLICY=%s, GOMP_SPINCOUNT=%s (realpos sets PASSIVE when both are unset)\n",
           policy ? policy : "(unset)", spin ? spin : "(unset)");
    const dnnl_version_t *dnnl = dnnl_version();
    CpuBf16 cpu = cpu_bf16_query();
    char bf16_line[160];
    cpu_bf16_describe(&cpu, bf16_line, sizeof bf16_line);
    printf("oneDNN %d.%d.%d (bf16 products); %s\n", dnnl->major, dnnl->minor, dnnl->patch, bf16_line);
}

/* OpenMP's idle threads (this program's and OpenBLAS's: one libgomp pool) spin before they sleep,
 * for up to 300,000 iterations by default. On a host shared with other jobs a spinning thread holds
 * the core its preempted partner needs, and a step of ~380 small parallel regions (SST-2 fine-tuning,
 * 32 unpadded sentences) then ran 8x slower on 2 threads than with OMP_WAIT_POLICY=PASSIVE (docs/bench.md,
 * "OpenMP wait policy"). libgomp reads the policy from the environment before main, so when the
 * user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT, realpos sets OMP_WAIT_POLICY=PASSIVE and
 * executes itself again with the same arguments (same process id); if that fails it runs on with
 * libgomp's default. Either variable set by the user is left as it is. */
static void prefer_passive_wait(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY"); /* not re-executed: this process keeps libgomp's default */
}

static int is_help(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h"); }

int main(int argc, char **argv) {
    prefer_passive_wait(argv);
    if (argc < 2) {
        command_print_list(stderr);
        return 2;
    }
    if (is_help(argv[1])) {
        command_print_list(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        print_version();
        return 0;
    }
    const Command *c = command_find(argv[1]);
    if (!c) {
        fprintf(stderr, "realpos: error: unknown command '%s'\n", argv[1]);
        command_print_list(stderr);
        return 2;
    }
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (is_help(argv[i])) {
            command_print_help(stdout, c);
            return 0;
        }
    /* Only training is data-parallel; N copies of another command would race on its outputs. */
    int parallel = !strcmp(argv[1], "pretrain") || !strcmp(argv[1], "finetune");
    if (!parallel && dist_launched_size() > 1) {
        fprintf(stderr, "realpos: error: '%s' runs in one process; launch it without mpirun/srun (only "
                "pretrain and finetune run on several ranks)\n", argv[1]);
        return 2;
    }
    int status = c->run(argc - 1, argv + 1);
    if (__lsan_do_leak_check)
        __lsan_do_leak_check();
    return status;
}
