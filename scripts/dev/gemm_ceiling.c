/* The GEMM-only ceiling of realpos bench's training step: how fast the step would run if
 * everything but its matrix products (softmax, layer norm, GELU, dropout, the relative gathers and
 * scatters, AdamW) cost nothing. For issue 20's targets: a fraction of the sgemm peak above the
 * ceiling, or a time overhead below the GEMM-only overhead, cannot be reached by any change to
 * the non-GEMM code; only fewer FLOPs or a faster GEMM can.
 *
 * Built by scripts/dev/gemm_ceiling.sh over build/librealpos.a with
 * -Wl,--wrap=cblas_sgemm,--wrap=gemm_small,--wrap=gemm_small_bias,--wrap=train_step (gemm_small and
 * gemm_small_bias: core/gemm_small.h's direct kernel, which computes the small products instead of
 * OpenBLAS, the latter starting from a bias row); its main is realpos bench's (cmd_bench), so it takes
 * the bench's arguments, --against included (each side is recorded on its own). After every
 * train_step it has:
 *   step     the step's time (wall seconds, or CPU seconds with --clock cpu);
 *   in-step  the time of its sgemm calls: a call from outside a parallel region counts its
 *            own time (OpenBLAS runs it on every thread); calls from inside one (attention's
 *            per-(batch, head) products) count, per run of consecutive such calls, the busiest
 *            thread's sum;
 *   replay   the same calls replayed right after the step on the same operands, with the same
 *            strides, in the same order, each parallel run on the threads that made its calls
 *            (best of --replays): the step with everything else removed, caches included;
 *   probe    the mean of a 1024^3 sgemm probe (train/loop/peak.h's) before and after the replays.
 * --clock cpu times all of these in this process's CPU seconds instead of wall seconds (a call in
 * a parallel region: its thread's, summed over the region's threads), which other processes of a
 * shared host do not inflate; the fractions then compare CPU time with CPU time. --shapes prints
 * every counted step's calls grouped by shape, with their time and rate in the step.
 * The replays write only what the step's GEMMs wrote (activations, and gradients, which are
 * zeroed again after them: the update left them zero for the next step): the weights are not
 * touched, so later steps are the bench's own. The bench's own
 * summary lines time around train_step, so they include the replays: read this tool's table.
 * Printed per side, medians over the timed steps (after --warmup; not the run's last, whose
 * metrics window the step resets):
 *   local % peak   model FLOPs (model_flops_per_step: no relative terms) / (step x probe): the
 *                  bench's figure; "all FLOPs" counts every GEMM FLOP the step ran (the bench's
 *                  "% peak (all FLOPs)");
 *   ceiling        the same over the replay's time: the most the step can reach with these GEMMs;
 *   non-GEMM       1 - in-step / step: the share a non-GEMM change can work on;
 * and with --against, per step pair: step and replay time ratios (side 1 over side 2) - 1, and
 * the floor of the step overhead, (replay 1 - replay 2) / step 2: what side 1 would cost over
 * side 2 if its extra non-GEMM work were free.
 *
 * A link-time interposer has no caller to hand it a context, so the recorder is this file's one
 * static state. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/common.h"
#include "core/gemm_small.h"
#include "train/loop/peak.h"
#include "train/cli/commands.h"
#include "train/loop/step.h"

enum { MAX_CALLS = 1 << 18, MAX_SIDES = 2, MAX_STEPS = 4096 };

/* The wrapped functions themselves (ld --wrap). */
void __real_cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint M, blasint N,
                        blasint K, float alpha, const float *A, blasint lda, const float *B, blasint ldb,
                        float beta, float *C, blasint ldc);
void __real_gemm_small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc);
void __real_gemm_small_bias(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            const float *bias, float *C, int ldc);
void __real_train_step(TrainStep *ts, long step);

typedef struct {
    CBLAS_ORDER order;
    CBLAS_TRANSPOSE trans_a, trans_b;
    blasint M, N, K, lda, ldb, ldc;
    float alpha, beta;
    const float *A, *B;
    float *C;
    int parallel, thread; /* made inside an active parallel region, by that thread */
    double seconds;
    int small;         /* a gemm_small or gemm_small_bias call (alpha 1) */
    const float *bias; /* gemm_small_bias's bias row, else NULL */
} GemmCall;

typedef struct {
    double step, in_step, replay, probe, model_flops, gemm_flops;
    long calls;
    int counted; /* 0: the step's metrics window was reset (the run's last step): not in the medians */
} StepRecord;

typedef struct {
    const TrainStep *ts;
    StepRecord steps[MAX_STEPS];
    int num_steps;
} SideRecord;

typedef struct {
    int recording, replays;
    int cpu_clock; /* --clock cpu: CPU seconds (process; a parallel region's calls their thread's) */
    int shapes;    /* --shapes: every counted step's GEMMs by shape */
    int timing_probe;                   /* the next call is train/loop/peak.h's probe: time it */
    double probe_seconds, probe_flops;  /* that call's time on this tool's clock, and FLOPs */
    GemmCall *calls;
    size_t num_calls;
    SideRecord sides[MAX_SIDES];
    int num_sides;
} Recorder;

static Recorder recorder;

/* The clock of every timing: wall seconds, or this process's CPU seconds (its threads summed),
 * which the other processes of a shared host do not inflate. */
static double clock_seconds(void) { return recorder.cpu_clock ? cpu_seconds() : now_seconds(); }

/* A call's own time: inside a parallel region with the CPU clock, the calling thread's. */
static double call_clock_seconds(int parallel) {
    if (!recorder.cpu_clock || !parallel)
        return clock_seconds();
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* train/loop/peak.h's probe (sgemm_probe_gflops: one 1024^3 sgemm) timed on this tool's clock: the
 * wrapper times the probe's one call while timing_probe is set. GFLOP/s. */
static double probe_gflops(void) {
    recorder.timing_probe = 1;
    sgemm_probe_gflops(NULL);
    recorder.timing_probe = 0;
    return recorder.probe_flops / recorder.probe_seconds * 1e-9;
}

void __wrap_cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, blasint M, blasint N,
                        blasint K, float alpha, const float *A, blasint lda, const float *B, blasint ldb,
                        float beta, float *C, blasint ldc) {
    if (recorder.timing_probe) {
        double t0 = clock_seconds();
        __real_cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        recorder.probe_seconds = clock_seconds() - t0;
        recorder.probe_flops = 2.0 * M * N * (double)K;
        return;
    }
    if (!__atomic_load_n(&recorder.recording, __ATOMIC_RELAXED)) {
        __real_cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    size_t slot = __atomic_fetch_add(&recorder.num_calls, 1, __ATOMIC_RELAXED);
    RP_CHECK(slot < MAX_CALLS, "gemm_ceiling: more than %d sgemm calls in one step", MAX_CALLS);
    const int parallel = omp_in_parallel();
    double t0 = call_clock_seconds(parallel);
    __real_cblas_sgemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    recorder.calls[slot] = (GemmCall){order, ta, tb, M, N, K, lda, ldb, ldc, alpha, beta, A, B, C,
                                      parallel, omp_get_thread_num(), call_clock_seconds(parallel) - t0, 0, NULL};
}

/* gemm_small's product of a call, with its bias row (gemm_small_bias) or from beta C */
static void small_product(const GemmCall *c) {
    const int ta = c->trans_a == CblasTrans, tb = c->trans_b == CblasTrans;
    if (c->bias)
        __real_gemm_small_bias(ta, tb, c->M, c->N, c->K, c->A, c->lda, c->B, c->ldb, c->bias, c->C, c->ldc);
    else
        __real_gemm_small(ta, tb, c->M, c->N, c->K, c->A, c->lda, c->B, c->ldb, c->beta, c->C, c->ldc);
}

/* A gemm_small or gemm_small_bias call (`call` without its timing) is recorded as the sgemm it
 * stands for. */
static void record_small(GemmCall call) {
    if (!__atomic_load_n(&recorder.recording, __ATOMIC_RELAXED)) {
        small_product(&call);
        return;
    }
    size_t slot = __atomic_fetch_add(&recorder.num_calls, 1, __ATOMIC_RELAXED);
    RP_CHECK(slot < MAX_CALLS, "gemm_ceiling: more than %d sgemm calls in one step", MAX_CALLS);
    call.parallel = omp_in_parallel(), call.thread = omp_get_thread_num();
    double t0 = call_clock_seconds(call.parallel);
    small_product(&call);
    call.seconds = call_clock_seconds(call.parallel) - t0;
    recorder.calls[slot] = call;
}

void __wrap_gemm_small(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                       float beta, float *C, int ldc) {
    record_small((GemmCall){CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, lda,
                            ldb, ldc, 1.0f, beta, A, B, C, 0, 0, 0.0, 1, NULL});
}

/* a linear layer's product that starts from its bias */
void __wrap_gemm_small_bias(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B, int ldb,
                            const float *bias, float *C, int ldc) {
    record_small((GemmCall){CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, lda,
                            ldb, ldc, 1.0f, 0.0f, A, B, C, 0, 0, 0.0, 1, bias});
}

static void replay_call(const GemmCall *c) {
    if (c->small) {
        small_product(c);
        return;
    }
    __real_cblas_sgemm(c->order, c->trans_a, c->trans_b, c->M, c->N, c->K, c->alpha, c->A, c->lda, c->B,
                       c->ldb, c->beta, c->C, c->ldc);
}

/* End of the run of parallel calls starting at `first`. */
static size_t parallel_run_end(const GemmCall *calls, size_t first, size_t n) {
    size_t end = first;
    while (end < n && calls[end].parallel)
        end++;
    return end;
}

static int run_team(const GemmCall *calls, size_t first, size_t end) {
    int team = 1;
    for (size_t i = first; i < end; i++)
        team = calls[i].thread + 1 > team ? calls[i].thread + 1 : team;
    return team;
}

/* Wall time of the recorded calls in the step (the busiest thread of each parallel run). */
static double in_step_seconds(const GemmCall *calls, size_t n) {
    double total = 0;
    for (size_t i = 0; i < n;) {
        if (!calls[i].parallel) {
            total += calls[i++].seconds;
            continue;
        }
        size_t end = parallel_run_end(calls, i, n);
        double busiest = 0, all = 0;
        for (int t = 0; t < run_team(calls, i, end); t++) {
            double sum = 0;
            for (size_t j = i; j < end; j++)
                sum += calls[j].thread == t ? calls[j].seconds : 0;
            busiest = sum > busiest ? sum : busiest;
            all += sum;
        }
        total += recorder.cpu_clock ? all : busiest;
        i = end;
    }
    return total;
}

/* The recorded calls once more, in order: serial ones on OpenBLAS's threads, each parallel run
 * with every thread replaying its own calls. Returns the wall time. */
static double replay_seconds(const GemmCall *calls, size_t n) {
    double t0 = clock_seconds();
    for (size_t i = 0; i < n;) {
        if (!calls[i].parallel) {
            replay_call(&calls[i++]);
            continue;
        }
        size_t end = parallel_run_end(calls, i, n);
        const size_t first = i;
#pragma omp parallel num_threads(run_team(calls, first, end))
        {
            const int me = omp_get_thread_num();
            for (size_t j = first; j < end; j++)
                if (calls[j].thread == me)
                    replay_call(&calls[j]);
        }
        i = end;
    }
    return clock_seconds() - t0;
}

typedef struct {
    const GemmCall *call; /* the first of its shape */
    long count;
    double seconds, flops;
} ShapeTotal;

/* The step's calls grouped by shape (transposes, M, N, K, and whether made in a parallel region),
 * largest in-step time first: calls, seconds, and GFLOP/s on the step's clock (a parallel
 * region's calls each on their thread, so per thread there). */
static void print_shapes(int side, long step, const GemmCall *calls, size_t n) {
    enum { MAX_SHAPES = 256 };
    ShapeTotal shapes[MAX_SHAPES];
    int num_shapes = 0;
    for (size_t i = 0; i < n; i++) {
        const GemmCall *c = &calls[i];
        int k = 0;
        while (k < num_shapes && !(shapes[k].call->trans_a == c->trans_a && shapes[k].call->trans_b == c->trans_b &&
                                   shapes[k].call->M == c->M && shapes[k].call->N == c->N &&
                                   shapes[k].call->K == c->K && shapes[k].call->parallel == c->parallel))
            k++;
        if (k == num_shapes) {
            if (num_shapes == MAX_SHAPES)
                k = MAX_SHAPES - 1; /* the rest share the last row */
            else
                shapes[num_shapes++] = (ShapeTotal){c, 0, 0, 0};
        }
        shapes[k].count++;
        shapes[k].seconds += c->seconds;
        shapes[k].flops += 2.0 * c->M * c->N * (double)c->K;
    }
    for (int a = 1; a < num_shapes; a++) /* by seconds, descending (insertion sort) */
        for (int b = a; b > 0 && shapes[b].seconds > shapes[b - 1].seconds; b--) {
            ShapeTotal t = shapes[b];
            shapes[b] = shapes[b - 1], shapes[b - 1] = t;
        }
    printf("side %d step %ld: GEMMs by shape (op(A) M x K times op(B) K x N)\n"
           "  trans | M | N | K | in parallel region | calls | seconds | GFLOP/s\n", side, step);
    for (int k = 0; k < num_shapes; k++) {
        const GemmCall *c = shapes[k].call;
        printf("  %c%c | %d | %d | %d | %s | %ld | %.4f | %.1f\n", c->trans_a == CblasTrans ? 'T' : 'N',
               c->trans_b == CblasTrans ? 'T' : 'N', c->M, c->N, c->K, c->parallel ? "yes" : "no", shapes[k].count,
               shapes[k].seconds, shapes[k].flops * 1e-9 / shapes[k].seconds);
    }
}

static SideRecord *side_of(const TrainStep *ts) {
    for (int s = 0; s < recorder.num_sides; s++)
        if (recorder.sides[s].ts == ts)
            return &recorder.sides[s];
    RP_CHECK(recorder.num_sides < MAX_SIDES, "gemm_ceiling: more than %d training steps in one bench", MAX_SIDES);
    SideRecord *side = &recorder.sides[recorder.num_sides++];
    side->ts = ts;
    return side;
}

void __wrap_train_step(TrainStep *ts, long step) {
    SideRecord *side = side_of(ts);
    RP_CHECK(side->num_steps < MAX_STEPS, "gemm_ceiling: more than %d steps", MAX_STEPS);
    const double flops_before = ts->window_flops;
    recorder.num_calls = 0;
    __atomic_store_n(&recorder.recording, 1, __ATOMIC_RELAXED);
    double t0 = clock_seconds();
    __real_train_step(ts, step);
    double t1 = clock_seconds();
    __atomic_store_n(&recorder.recording, 0, __ATOMIC_RELAXED);

    const size_t n = recorder.num_calls;
    StepRecord *r = &side->steps[side->num_steps++];
    *r = (StepRecord){.step = t1 - t0, .in_step = in_step_seconds(recorder.calls, n),
                      .model_flops = ts->window_flops - flops_before, .calls = (long)n};
    r->counted = r->model_flops > 0;
    if (!r->counted)
        return;
    if (recorder.shapes)
        print_shapes((int)(side - recorder.sides) + 1, step, recorder.calls, n);
    for (size_t i = 0; i < n; i++)
        r->gemm_flops += 2.0 * recorder.calls[i].M * recorder.calls[i].N * (double)recorder.calls[i].K;
    double probe_before = probe_gflops();
    r->replay = 1e30;
    for (int k = 0; k < recorder.replays; k++) {
        double seconds = replay_seconds(recorder.calls, n);
        r->replay = seconds < r->replay ? seconds : r->replay;
    }
    r->probe = 0.5 * (probe_before + probe_gflops());
    zero_floats(ts->model->grads, ts->model->table.block_floats); /* as the step's update left them */
    fprintf(stderr, "gemm_ceiling: side %d step %ld: step %.3f s, its GEMMs %.3f s, replay %.3f s, %ld calls, "
            "%.2f model GFLOP, probe %.1f GFLOP/s\n", (int)(side - recorder.sides) + 1, step, r->step, r->in_step,
            r->replay, r->calls, r->model_flops * 1e-9, r->probe);
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *values, int n) {
    qsort(values, (size_t)n, sizeof *values, by_value);
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

/* Median over the counted timed steps of f(step). */
static double side_median(const SideRecord *side, int warmup, double (*f)(const StepRecord *)) {
    double values[MAX_STEPS];
    int n = 0;
    for (int s = warmup; s < side->num_steps; s++)
        if (side->steps[s].counted)
            values[n++] = f(&side->steps[s]);
    return median(values, n);
}

static int counted_steps(const SideRecord *side, int warmup) {
    int n = 0;
    for (int s = warmup; s < side->num_steps; s++)
        n += side->steps[s].counted;
    return n;
}

static double step_s(const StepRecord *r) { return r->step; }
static double replay_s(const StepRecord *r) { return r->replay; }
static double local_peak(const StepRecord *r) { return r->model_flops * 1e-9 / (r->step * r->probe); }
static double local_peak_all(const StepRecord *r) { return r->gemm_flops * 1e-9 / (r->step * r->probe); }
static double ceiling(const StepRecord *r) { return r->model_flops * 1e-9 / (r->replay * r->probe); }
static double ceiling_all(const StepRecord *r) { return r->gemm_flops * 1e-9 / (r->replay * r->probe); }
static double non_gemm(const StepRecord *r) { return 1 - r->in_step / r->step; }
static double gemm_over_model(const StepRecord *r) { return r->gemm_flops / r->model_flops; }

/* Median over step pairs s of side a's f over side b's, minus 1. */
static double pair_overhead(const SideRecord *a, const SideRecord *b, int warmup, double (*f)(const StepRecord *)) {
    double values[MAX_STEPS];
    int n = 0;
    for (int s = warmup; s < a->num_steps && s < b->num_steps; s++)
        if (a->steps[s].counted && b->steps[s].counted)
            values[n++] = f(&a->steps[s]) / f(&b->steps[s]) - 1;
    return median(values, n);
}

/* Median over step pairs of (replay_a - replay_b) / step_b: side a's step overhead over side b's
 * if a's extra work outside GEMMs cost nothing, b's step unchanged. A target overhead below it
 * needs fewer GEMM FLOPs, faster GEMMs or a cheaper b. */
static double gemm_floor_overhead(const SideRecord *a, const SideRecord *b, int warmup) {
    double values[MAX_STEPS];
    int n = 0;
    for (int s = warmup; s < a->num_steps && s < b->num_steps; s++)
        if (a->steps[s].counted && b->steps[s].counted)
            values[n++] = (a->steps[s].replay - b->steps[s].replay) / b->steps[s].step;
    return median(values, n);
}

int main(int argc, char **argv) {
    const char *usage = "usage: gemm_ceiling [--replays R] [--clock wall|cpu] [--shapes] CONFIG.ini BENCH_OPTIONS... (realpos bench's)";
    int first = 1;
    recorder.replays = 3;
    while (first + 1 < argc && (!strcmp(argv[first], "--replays") || !strcmp(argv[first], "--clock") ||
                                !strcmp(argv[first], "--shapes"))) {
        if (!strcmp(argv[first], "--shapes")) {
            recorder.shapes = 1;
            first += 1;
            continue;
        }
        if (!strcmp(argv[first], "--replays")) {
            recorder.replays = atoi(argv[first + 1]);
        } else {
            RP_CHECK(!strcmp(argv[first + 1], "wall") || !strcmp(argv[first + 1], "cpu"),
                     "gemm_ceiling --clock: expected wall or cpu, got '%s'", argv[first + 1]);
            recorder.cpu_clock = !strcmp(argv[first + 1], "cpu");
        }
        first += 2;
    }
    RP_CHECK(recorder.replays > 0 && argc > first, "%s", usage);
    int warmup = 2; /* realpos bench's default */
    for (int a = first; a + 1 < argc; a++)
        if (!strcmp(argv[a], "--warmup"))
            warmup = atoi(argv[a + 1]);
    recorder.calls = xmalloc(sizeof(GemmCall) * MAX_CALLS);

    char *bench_argv[256];
    RP_CHECK(argc - first + 1 < 256, "%s", usage);
    int bench_argc = 0;
    bench_argv[bench_argc++] = "bench";
    for (int a = first; a < argc; a++)
        bench_argv[bench_argc++] = argv[a];
    bench_argv[bench_argc] = NULL;
    int status = cmd_bench(bench_argc, bench_argv);
    RP_CHECK(status == 0, "gemm_ceiling: realpos bench failed (status %d)", status);

    printf("side | steps | step s | replay s | GEMM calls | all/model FLOPs | local %% peak | ceiling %% peak | "
           "local %% peak (all FLOPs) | ceiling %% peak (all FLOPs) | non-GEMM share %%\n");
    for (int s = 0; s < recorder.num_sides; s++) {
        const SideRecord *side = &recorder.sides[s];
        const int n = counted_steps(side, warmup);
        RP_CHECK(n > 0, "gemm_ceiling: side %d has no timed step to count (%d steps, --warmup %d, the last not "
                 "counted): give --steps 2 or more", s + 1, side->num_steps, warmup);
        printf("%d | %d | %.3f | %.3f | %ld | %.6f | %.1f | %.1f | %.1f | %.1f | %.1f\n", s + 1, n,
               side_median(side, warmup, step_s), side_median(side, warmup, replay_s), side->steps[warmup].calls,
               side_median(side, warmup, gemm_over_model), 100 * side_median(side, warmup, local_peak),
               100 * side_median(side, warmup, ceiling), 100 * side_median(side, warmup, local_peak_all),
               100 * side_median(side, warmup, ceiling_all), 100 * side_median(side, warmup, non_gemm));
    }
    if (recorder.num_sides == 2) {
        const SideRecord *a = &recorder.sides[0], *b = &recorder.sides[1];
        printf("pairs, medians over step pairs: step time overhead (side 1 / side 2 - 1) %+.1f%%, GEMM-only "
               "replay overhead %+.1f%%, step overhead with side 1's extra non-GEMM work free "
               "((replay 1 - replay 2) / step 2) %+.1f%%\n", 100 * pair_overhead(a, b, warmup, step_s),
               100 * pair_overhead(a, b, warmup, replay_s), 100 * gemm_floor_overhead(a, b, warmup));
    }
    free(recorder.calls);
    return 0;
}
