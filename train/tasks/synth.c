/* The synthetic tasks' generators (synth.h; definitions and sources in docs/synthetic.md). */
#include "train/tasks/synth.h"

#include <string.h>

#include "core/common.h"

static const char *const task_names[] = {"reverse", "duplicate", "odds_first", "sort", "binary_addition", "mqar", "lookup"};

int synth_task_find(const char *name) {
    for (int t = 0; t < SYNTH_NUM_TASKS; t++)
        if (!strcmp(name, task_names[t]))
            return t;
    return -1;
}

const char *synth_task_name(SynthTask task) { return task_names[task]; }

int synth_task_has_distance(SynthTask task) { return task == SYNTH_LOOKUP; }

int synth_min_length(SynthTask task, int distance) {
    return task == SYNTH_BINARY_ADDITION ? 3 : task == SYNTH_LOOKUP ? distance + 1 : 1;
}

static int addend_a(int n) { return n / 2; } /* ceil((n - 1) / 2) */
static int addend_b(int n) { return (n - 1) / 2; }

int synth_words(SynthTask task, int n) {
    switch (task) {
    case SYNTH_DUPLICATE: return 3 * n;
    case SYNTH_BINARY_ADDITION: return n + addend_a(n) + 1;
    case SYNTH_MQAR: return 3 * n;
    case SYNTH_LOOKUP: return n;
    default: return 2 * n;
    }
}

static void push(SynthExample *ex, const char *word, const char *label) {
    if (ex->count == ex->capacity) {
        ex->capacity = ex->capacity ? 2 * ex->capacity : 64;
        ex->word = realloc(ex->word, sizeof *ex->word * (size_t)ex->capacity);
        ex->label = realloc(ex->label, sizeof *ex->label * (size_t)ex->capacity);
        RP_CHECK(ex->word && ex->label, "out of memory generating a synthetic example");
    }
    snprintf(ex->word[ex->count], SYNTH_WORD, "%s", word);
    snprintf(ex->label[ex->count], SYNTH_WORD, "%s", label);
    ex->count++;
}

static void digit(char *out, int d) { snprintf(out, SYNTH_WORD, "%d", d); }

/* The input words x[0..n) (labels ignored), then one blank per output symbol y[0..m). */
static void input_then_blanks(SynthExample *ex, const int *x, int n, const int *y, int m) {
    char text[SYNTH_WORD];
    for (int i = 0; i < n; i++) {
        digit(text, x[i]);
        push(ex, text, SYNTH_IGNORED);
    }
    for (int i = 0; i < m; i++) {
        digit(text, y[i]);
        push(ex, SYNTH_BLANK, text);
    }
}

static void mqar(int n, Rng *rng, SynthExample *ex) {
    RP_CHECK(n <= SYNTH_MQAR_KEYS, "mqar: %d pairs need %d distinct keys, the key vocabulary has %d", n, n,
             SYNTH_MQAR_KEYS);
    int keys[SYNTH_MQAR_KEYS], *value = xmalloc(sizeof(int) * (size_t)n), *order = xmalloc(sizeof(int) * (size_t)n);
    for (int k = 0; k < SYNTH_MQAR_KEYS; k++)
        keys[k] = k;
    for (int i = 0; i < n; i++) { /* partial Fisher-Yates: n distinct keys */
        int j = i + (int)rng_below(rng, (uint64_t)(SYNTH_MQAR_KEYS - i)), t = keys[i];
        keys[i] = keys[j];
        keys[j] = t;
        value[i] = (int)rng_below(rng, SYNTH_MQAR_VALUES);
        order[i] = i;
    }
    for (int i = n - 1; i > 0; i--) { /* the queries' order */
        int j = (int)rng_below(rng, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    char k[SYNTH_WORD], v[SYNTH_WORD];
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "k%d", keys[i]);
        snprintf(v, sizeof v, "v%d", value[i]);
        push(ex, k, SYNTH_IGNORED);
        push(ex, v, SYNTH_IGNORED);
    }
    for (int i = 0; i < n; i++) {
        snprintf(k, sizeof k, "k%d", keys[order[i]]);
        snprintf(v, sizeof v, "v%d", value[order[i]]);
        push(ex, k, v);
    }
    free(value);
    free(order);
}

/* x_0..x_{n-1} uniform over the letters; word i labelled x_{i-D} from i = D on. */
static void lookup(int n, int distance, Rng *rng, SynthExample *ex) {
    char *x = xmalloc((size_t)n);
    char word[2] = {0}, label[2] = {0};
    for (int i = 0; i < n; i++) {
        x[i] = (char)('a' + rng_below(rng, SYNTH_LOOKUP_SYMBOLS));
        word[0] = x[i];
        if (i >= distance)
            label[0] = x[i - distance];
        push(ex, word, i >= distance ? label : SYNTH_IGNORED);
    }
    free(x);
}

void synth_generate(SynthTask task, int n, int distance, Rng *rng, SynthExample *ex) {
    RP_CHECK(synth_task_has_distance(task) ? distance >= 1 && distance <= SYNTH_DISTANCE_MAX : distance == 0,
             "%s: distance %d, expected %s", task_names[task], distance,
             synth_task_has_distance(task) ? "1..4096" : "none (only lookup takes one)");
    RP_CHECK(n >= synth_min_length(task, distance), "%s: length %d, expected at least %d", task_names[task], n,
             synth_min_length(task, distance));
    ex->count = 0;
    if (task == SYNTH_MQAR) {
        mqar(n, rng, ex);
        return;
    }
    if (task == SYNTH_LOOKUP) {
        lookup(n, distance, rng, ex);
        return;
    }
    int *x = xmalloc(sizeof(int) * (size_t)n), *y = xmalloc(sizeof(int) * (size_t)(2 * n + 1)), m = n;
    int symbols = task == SYNTH_SORT ? 5 : 2;
    for (int i = 0; i < n; i++)
        x[i] = (int)rng_below(rng, (uint64_t)symbols);
    switch (task) {
    case SYNTH_REVERSE:
        for (int i = 0; i < n; i++)
            y[i] = x[n - 1 - i];
        break;
    case SYNTH_DUPLICATE:
        m = 2 * n;
        for (int i = 0; i < n; i++)
            y[i] = y[n + i] = x[i];
        break;
    case SYNTH_ODDS_FIRST: /* 1-based odd positions x_1 x_3 .. (0-based even), then the others */
        m = 0;
        for (int i = 0; i < n; i += 2)
            y[m++] = x[i];
        for (int i = 1; i < n; i += 2)
            y[m++] = x[i];
        break;
    case SYNTH_SORT: {
        int counts[5] = {0};
        for (int i = 0; i < n; i++)
            counts[x[i]]++;
        m = 0;
        for (int s = 0; s < 5; s++)
            for (int c = 0; c < counts[s]; c++)
                y[m++] = s;
        break;
    }
    case SYNTH_BINARY_ADDITION: { /* a [+] b, little-endian; the sum has |a| + 1 digits */
        int la = addend_a(n), lb = addend_b(n), carry = 0;
        char text[SYNTH_WORD];
        for (int i = 0; i < la; i++) {
            digit(text, x[i]);
            push(ex, text, SYNTH_IGNORED);
        }
        push(ex, "+", SYNTH_IGNORED);
        for (int i = 0; i < lb; i++) {
            digit(text, x[la + i]);
            push(ex, text, SYNTH_IGNORED);
        }
        for (int i = 0; i <= la; i++) {
            int s = (i < la ? x[i] : 0) + (i < lb ? x[la + i] : 0) + carry;
            y[i] = s & 1;
            carry = s >> 1;
        }
        input_then_blanks(ex, x, 0, y, la + 1);
        free(x);
        free(y);
        return;
    }
    default: break;
    }
    input_then_blanks(ex, x, n, y, m);
    free(x);
    free(y);
}

void synth_example_free(SynthExample *ex) {
    free(ex->word);
    free(ex->label);
    memset(ex, 0, sizeof *ex);
}

void synth_write(FILE *out, const SynthExample *ex) {
    for (int i = 0; i < ex->count; i++)
        fprintf(out, "%s %s\n", ex->word[i], ex->label[i]);
    fputc('\n', out);
}
