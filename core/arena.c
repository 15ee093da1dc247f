#include "core/arena.h"

#include "core/common.h"

void arena_allocate(Arena *arena, size_t floats, const char *what) {
    arena->base = xalloc_floats_for(floats, what);
    arena->capacity = floats;
    arena->used = 0;
}

float *arena_take(Arena *arena, size_t count) {
    size_t aligned = (count + 15) / 16 * 16; /* 16 floats = 64 bytes */
    size_t start = arena->used;
    arena->used += aligned;
    if (!arena->base)
        return NULL;
    RP_CHECK(arena->used <= arena->capacity, "internal: arena overflow (%zu > %zu floats)", arena->used,
             arena->capacity);
    return arena->base + start;
}

void arena_free(Arena *arena) {
    free(arena->base);
    *arena = arena_measuring();
}
