/* The bump allocator for laying out one contiguous block (parameters, gradients, activations,
 * attention scratch). Layout code runs twice: once with a measuring arena (base == NULL) to learn
 * the size, then with a real one, owned (arena_allocate) or a view of a block the caller owns
 * (arena_view). Every allocation is rounded up to 16 floats, so it is 64-byte aligned when the
 * base is. */
#pragma once
#include <stddef.h>

typedef struct {
    float *base;     /* NULL while measuring */
    size_t capacity; /* in floats */
    size_t used;     /* in floats */
} Arena;

static inline Arena arena_measuring(void) { return (Arena){0, 0, 0}; }
/* An arena over `floats` floats at base, owned by the caller (do not arena_free it). */
static inline Arena arena_view(float *base, size_t floats) { return (Arena){base, floats, 0}; }
/* Allocate the block for a measured arena (zeroed); out of memory names `what`. */
void arena_allocate(Arena *arena, size_t floats, const char *what);
/* Next `count` floats (NULL while measuring); fatal if the arena is full. */
float *arena_take(Arena *arena, size_t count);
void arena_free(Arena *arena);
