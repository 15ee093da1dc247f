#include "optim/dist.h"

#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* abort_job of core's error path in a job of several ranks: MPI_Abort, so that the other ranks
 * stop instead of waiting forever in a collective for this one. */
static void abort_every_rank(void) {
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    fprintf(stderr, "realpos: rank %d of %d failed (message above); stopping every rank\n", rank, size);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* A launcher's process count: 0 if unset or empty; anything but a whole number >= 1 is fatal (a
 * garbled count must not quietly start a run of one process). */
static int env_int(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    RP_CHECK(*end == '\0' && errno == 0 && n >= 1 && n <= INT_MAX && (*v >= '0' && *v <= '9'),
             "environment variable %s: expected a number of processes (a whole number >= 1), got '%s'", name, v);
    return (int)n;
}

/* OpenMPI's mpirun sets OMPI_COMM_WORLD_SIZE; PMI-1/2 launchers (srun --mpi=pmi2, MPICH's hydra)
 * set PMI_SIZE; PMIx launchers (srun --mpi=pmix) set PMIX_RANK, the size being Slurm's. */
static int launcher_size(void) {
    int n = env_int("OMPI_COMM_WORLD_SIZE");
    if (!n)
        n = env_int("PMI_SIZE");
    if (!n && getenv("PMIX_RANK")) {
        n = env_int("SLURM_STEP_NUM_TASKS");
        n = n ? n : 1;
    }
    return n;
}

int dist_launched_size(void) {
    int n = launcher_size();
    return n ? n : 1;
}

void dist_init(Dist *d, int *argc, char ***argv) {
    memset(d, 0, sizeof *d);
    d->size = d->local_size = 1;
    if (!launcher_size()) {
        int tasks = env_int("SLURM_STEP_NUM_TASKS");
        RP_CHECK(tasks <= 1, "srun started %d tasks (SLURM_STEP_NUM_TASKS) without an MPI plugin (no PMIX_RANK or "
                 "PMI_SIZE in the environment): each would train alone; launch with `srun --mpi=pmix` (see "
                 "docs/distributed.md)", tasks);
        return;
    }
    int provided = 0;
    RP_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS, "MPI_Init_thread failed");
    d->initialized = 1;
    RP_CHECK(provided >= MPI_THREAD_FUNNELED, "the MPI library provides thread level %d, below MPI_THREAD_FUNNELED",
             provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &d->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d->size);
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
    MPI_Comm_size(local, &d->local_size);
    MPI_Comm_free(&local);
    if (d->size > 1) {
        rp_install_job_hooks((JobHooks){abort_every_rank, d->rank != 0});
        d->gathered = xmalloc(sizeof(double) * (size_t)d->size * DIST_MAX_VALUES);
        d->piece = xalloc_floats(DIST_PIECE);
    }
}

void dist_set_threads(const Dist *d, int configured) {
    if (configured > 0)
        omp_set_num_threads(configured);
    else if (!getenv("OMP_NUM_THREADS") && d->local_size > 1) {
        int share = omp_get_num_procs() / d->local_size;
        omp_set_num_threads(share > 0 ? share : 1);
    }
}

void dist_finalize(Dist *d) {
    free(d->gathered);
    free(d->piece);
    if (d->size > 1)
        rp_install_job_hooks((JobHooks){NULL, 0}); /* MPI_Abort is no longer valid */
    if (d->initialized)
        MPI_Finalize();
    memset(d, 0, sizeof *d);
}

void dist_shards_create(DistShards *s, size_t n, int size) {
    s->size = size;
    s->n = n;
    s->lo = xmalloc(sizeof(size_t) * (size_t)(size + 1));
    s->counts = xmalloc(sizeof(int) * (size_t)size);
    s->displs = xmalloc(sizeof(int) * (size_t)size);
    for (int r = 0; r <= size; r++)
        s->lo[r] = r == size ? n : n / DIST_ALIGN * (size_t)r / (size_t)size * DIST_ALIGN;
    RP_CHECK(n <= (size_t)INT_MAX, "a block of %zu floats is too large for MPI's int counts", n);
    for (int r = 0; r < size; r++) {
        s->counts[r] = (int)(s->lo[r + 1] - s->lo[r]);
        s->displs[r] = (int)s->lo[r];
    }
}

void dist_shards_free(DistShards *s) {
    free(s->lo);
    free(s->counts);
    free(s->displs);
    memset(s, 0, sizeof *s);
}

/* Ring step k (0..N-2): rank r sends its partial sum of slice (r-k-1) mod N to r+1 and adds the
 * partial of slice (r-k-2) mod N received from r-1 to its own; after N-1 steps slice r is
 * complete on rank r. Messages go in pieces of at most DIST_PIECE floats. */
void dist_reduce_scatter_sum(Dist *d, const DistShards *s, float *block) {
    int N = d->size, r = d->rank;
    if (N == 1)
        return;
    double t0 = MPI_Wtime();
    int next = (r + 1) % N, prev = (r + N - 1) % N;
    for (int k = 0; k < N - 1; k++) {
        int send = ((r - k - 1) % N + 2 * N) % N, recv = ((r - k - 2) % N + 2 * N) % N;
        size_t send_n = s->lo[send + 1] - s->lo[send], recv_n = s->lo[recv + 1] - s->lo[recv];
        for (size_t off = 0; off < send_n || off < recv_n; off += DIST_PIECE) {
            int sn = off < send_n ? (int)(send_n - off < DIST_PIECE ? send_n - off : DIST_PIECE) : 0;
            int rn = off < recv_n ? (int)(recv_n - off < DIST_PIECE ? recv_n - off : DIST_PIECE) : 0;
            MPI_Sendrecv(block + s->lo[send] + off, sn, MPI_FLOAT, next, k, d->piece, rn, MPI_FLOAT, prev, k,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            float *restrict dst = block + s->lo[recv] + off;
            const float *restrict got = d->piece;
#pragma omp parallel for simd schedule(static) if (rn > 65536)
            for (int e = 0; e < rn; e++)
                dst[e] = got[e] + dst[e];
        }
    }
    d->comm_seconds += MPI_Wtime() - t0;
}

void dist_allgather(Dist *d, const DistShards *s, float *block) {
    if (d->size == 1)
        return;
    double t0 = MPI_Wtime();
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, block, s->counts, s->displs, MPI_FLOAT, MPI_COMM_WORLD);
    d->comm_seconds += MPI_Wtime() - t0;
}

void dist_gather_to_root(Dist *d, const DistShards *s, float *block) {
    if (d->size == 1)
        return;
    double t0 = MPI_Wtime();
    int r = d->rank;
    MPI_Gatherv(r == 0 ? MPI_IN_PLACE : block + s->lo[r], s->counts[r], MPI_FLOAT, block, s->counts, s->displs,
                MPI_FLOAT, 0, MPI_COMM_WORLD);
    d->comm_seconds += MPI_Wtime() - t0;
}

void dist_broadcast(Dist *d, float *block, size_t n) {
    if (d->size == 1)
        return;
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < n; off += (size_t)1 << 28) {
        size_t m = n - off < ((size_t)1 << 28) ? n - off : (size_t)1 << 28;
        MPI_Bcast(block + off, (int)m, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
    d->comm_seconds += MPI_Wtime() - t0;
}

void dist_sum_doubles(Dist *d, double *values, int n) {
    RP_CHECK(n >= 0 && n <= DIST_MAX_VALUES, "dist_sum_doubles: %d values, at most %d", n, DIST_MAX_VALUES);
    if (d->size == 1)
        return;
    double t0 = MPI_Wtime();
    MPI_Allgather(values, n, MPI_DOUBLE, d->gathered, n, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        double sum = 0.0;
        for (int r = 0; r < d->size; r++)
            sum += d->gathered[(size_t)r * (size_t)n + (size_t)i];
        values[i] = sum;
    }
    d->comm_seconds += MPI_Wtime() - t0;
}

/* The 0-based number of the first line where a and b differ, -1 if they are equal; *at_a and
 * *at_b point to that line in each. */
static int first_differing_line(const char *a, const char *b, const char **at_a, const char **at_b) {
    int line = 0;
    for (*at_a = a, *at_b = b; *a || *b; a++, b++) {
        if (*a != *b)
            return line;
        if (*a == '\n') {
            line++;
            *at_a = a + 1, *at_b = b + 1;
        }
    }
    return -1;
}

void dist_require_same_text(Dist *d, const char *text, const char *what) {
    if (d->size == 1)
        return;
    long long len = d->rank == 0 ? (long long)strlen(text) : 0;
    MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
    char *root_text = xmalloc((size_t)len + 1);
    if (d->rank == 0)
        memcpy(root_text, text, (size_t)len);
    MPI_Bcast(root_text, (int)len, MPI_CHAR, 0, MPI_COMM_WORLD);
    root_text[len] = '\0';
    const char *root_line, *own_line;
    int line = first_differing_line(root_text, text, &root_line, &own_line);
    int *all = xmalloc(sizeof(int) * (size_t)d->size);
    MPI_Allgather(&line, 1, MPI_INT, all, 1, MPI_INT, MPI_COMM_WORLD);
    int differs = -1, differing_line = -1;
    for (int r = 1; r < d->size && differs < 0; r++)
        if (all[r] >= 0)
            differs = r, differing_line = all[r];
    free(all);
    if (differs < 0) {
        free(root_text);
        return;
    }
    /* The first rank that differs names both lines and aborts the job; the others wait for it. */
    if (d->rank == differs)
        RP_FATAL("rank %d's %s differs from rank 0's at line %d: rank 0 has '%.*s', rank %d has '%.*s'; every rank "
                 "must run the same one (same files, --set overrides and --resume on every rank)", differs, what,
                 line + 1, (int)strcspn(root_line, "\n"), root_line, differs, (int)strcspn(own_line, "\n"),
                 own_line);
    MPI_Barrier(MPI_COMM_WORLD);
    RP_FATAL("rank %d's %s differs from rank 0's at line %d", differs, what, differing_line + 1);
}
