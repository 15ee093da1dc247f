/* Data-parallel communication over MPI: the only module that talks to MPI (no other file may
 * include mpi.h: tests/core/check_includes.py).
 *
 * Joining. A process started by an MPI launcher (mpirun/mpiexec, srun --mpi=pmix|pmi2: detected
 * from the launcher's environment) joins the job with MPI_Init_thread(FUNNELED: only the main
 * thread calls MPI, OpenMP threads compute). A process started by hand runs alone without
 * initialising MPI: OpenMPI's singleton MPI_Init forks an orted and costs ~0.6 s for nothing. At
 * size 1 every collective below is a copy-free no-op. In a job of several ranks, dist_init installs
 * core's job hooks (core/common.h): a fatal error on any rank calls MPI_Abort, and only rank 0
 * logs; dist_finalize resets them.
 *
 * Determinism. The gradient sum is our own ring reduce-scatter over MPI_Sendrecv: the sum of
 * shard c is ((g_{c+1} + g_{c+2}) + ...) + g_c (ranks mod N), a fixed order for a given N, computed
 * once and copied to every rank by MPI_Allgatherv. Small sums (metrics, flags) are gathered and
 * added in rank order on every rank. So two runs with the same N give the same bits and every rank
 * holds the same bits, whatever algorithm OpenMPI would pick for MPI_Allreduce.
 *
 * Shards. A block of n floats is cut into `size` contiguous slices, rank r owning
 * [lo[r], lo[r+1]); boundaries are multiples of DIST_ALIGN floats (64 bytes). The same layout
 * serves the reduce-scatter of gradients and ZeRO-1's optimizer shards. */
#pragma once
#include <stddef.h>

#define DIST_ALIGN 16        /* floats: shard boundaries stay 64-byte aligned */
#define DIST_MAX_VALUES 16   /* doubles per dist_sum_doubles call */
#define DIST_PIECE (1 << 20) /* floats per ring message (4 MB): bounds the receive buffer */

typedef struct {
    int rank, size;
    int local_size;    /* ranks on this machine (MPI_COMM_TYPE_SHARED) */
    int initialized;   /* this process called MPI_Init (and calls MPI_Finalize) */
    double *gathered;  /* [size * DIST_MAX_VALUES] scratch of dist_sum_doubles */
    float *piece;      /* [DIST_PIECE] receive buffer of the ring */
    double comm_seconds; /* wall time spent inside this module's collectives since dist_init */
} Dist;

typedef struct {
    int size;
    size_t n;
    size_t *lo;          /* [size + 1]: rank r owns [lo[r], lo[r + 1]) */
    int *counts, *displs; /* [size]: the same in MPI's int counts (Allgatherv/Gatherv) */
} DistShards;

/* Join the job if a launcher started this process (else size 1). Fatal, naming the variables, if
 * srun started several tasks without a PMI plugin (each would train alone). */
void dist_init(Dist *d, int *argc, char ***argv);
void dist_finalize(Dist *d);
static inline int dist_is_root(const Dist *d) { return d->rank == 0; }
/* OpenMP threads of this rank: `configured` if > 0 (train.threads), else OMP_NUM_THREADS if set,
 * else the machine's cores divided among its ranks (so N ranks per machine do not oversubscribe). */
void dist_set_threads(const Dist *d, int configured);
/* Number of ranks a launcher started this process among (1 without a launcher), before
 * dist_init; lets single-process commands refuse to run N copies of themselves. */
int dist_launched_size(void);

void dist_shards_create(DistShards *s, size_t n, int size);
void dist_shards_free(DistShards *s);

/* block [n] on every rank -> block[lo[rank], lo[rank+1]) = sum over ranks (the order above);
 * the rest of block is clobbered with partial sums. */
void dist_reduce_scatter_sum(Dist *d, const DistShards *s, float *block);
/* Every rank's own slice of block copied into block on every rank. */
void dist_allgather(Dist *d, const DistShards *s, float *block);
/* Root's whole block <- every rank's own slice (MPI_Gatherv); other ranks' block is not touched. */
void dist_gather_to_root(Dist *d, const DistShards *s, float *block);
/* Rank 0's n floats copied to every rank. */
void dist_broadcast(Dist *d, float *block, size_t n);
/* values[0..n) <- their sum over ranks, added in rank order (same bits on every rank). */
void dist_sum_doubles(Dist *d, double *values, int n);
/* Fatal unless every rank passes the same text (e.g. the effective config): the first rank that
 * differs names the first line that differs (a config key) with both values. */
void dist_require_same_text(Dist *d, const char *text, const char *what);
