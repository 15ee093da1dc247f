/* The shape of one attention call (attention.h gives the op and the formulas): a header of its
 * own, below attention.h, attention_plan.h and the position schemes (positions.h), which all read
 * it, so that none of them includes another in a circle. */
#pragma once

#include "core/bf16.h"  /* bf16 */
#include "core/kinds.h" /* RelKind */

struct PosTables;
struct Gemm;
struct AttnVarlenPlan;

typedef struct AttnShape {
    int B, L, H, num_heads;
    RelKind rel;
    int rel_k;           /* truncation distance k of the formulas (shaw, methods 1-4 only) */
    int t5_num_buckets;  /* t5: buckets of the shared table (even, >= 4) */
    int t5_max_distance; /* t5: distance at which the log buckets end */
    float rope_theta;    /* rope: base of the frequencies theta_t = rope_theta^(-2t/d) */
    int residual;        /* carry scores between layers */
    int first_layer;     /* residual: this layer starts the carried sum (C = S, not C += S) */
    float carried_scale; /* residual: logits = carried_scale * C */
    float dropout;       /* probability dropout; 0 in eval */
    int threads;         /* threads the scratch is sized for; the parallel regions use at most
                          * this many (0 = 1), whatever omp_get_max_threads() says by then */
    const struct PosTables *tables; /* the length-only tables built for L (or a longer length:
                              * pos_tables_build), or NULL: each call builds them in its scratch */
    /* Unpadded (varlen) layout: NULL, or [B+1] row offsets: sequence b is rows seq_offsets[b] ..
     * seq_offsets[b+1]-1 of qkv and ctx (T = seq_offsets[B] rows in all), of its own length
     * L_b = seq_offsets[b+1] - seq_offsets[b] <= L, and its (b,h) score blocks [L_b, L_b] follow
     * each other: sequence b's start at heads * sum_{b' < b} L_b'^2. No mask: every row is real. */
    const int *seq_offsets;
    /* Unpadded: the scratch plan made once at start-up for the largest batch (attn_varlen_plan,
     * attention.h; the model keeps it with its activations), or NULL: each call plans its own
     * (a scan over every length up to L). */
    const struct AttnVarlenPlan *varlen;
    /* Dropout numbering: element (b, h, i, j) of the scores is mask index
     * ((drop_seq + b) * heads + h) * Ld^2 + i * Ld + j, Ld = drop_L (0: L). The padded layout
     * [B, Ld] and an unpadded one with drop_L = Ld draw the same mask for the same (sequence,
     * position) pairs. */
    int drop_seq, drop_L;
    struct Gemm *gemm;   /* a bf16 context (core/gemm.h) with >= threads lanes: the term q_i.k_j, P.V
                          * and their backward products in bf16 (gemm_lane; dctx, P and dS rounded to
                          * bf16 once per (b,h), Q, K, V too unless qkv16 holds them; accumulation and
                          * everything else fp32);
                          * NULL or fp32: every product in fp32 (gemm_f32) */
    /* bf16 context only: Q|K|V [B*L, 3H] in bf16 (the layer's, written once by its projection), which
     * the products read in place (row stride 3H) and the schemes that need fp32 q, k (rope's rotation,
     * method3) expand exactly per (b,h); the call's qkv is then NULL. NULL: qkv in fp32, rounded to
     * bf16 per (b,h). */
    const bf16 *qkv16;
    /* bf16 context only: the forward's ctx [B*L, H] written in bf16 here (each head's P.V in fp32 in the
     * thread's scratch, rounded), the output projection reading nothing else; the call's ctx is then
     * NULL. NULL: ctx in fp32. */
    bf16 *ctx16;
    int lane;            /* bf16: the call's thread t uses lane `lane + t` (0 for a call that makes its
                          * own team; a one-thread call made inside a parallel region passes the caller's
                          * thread number, so no two threads share a lane) */
} AttnShape;
