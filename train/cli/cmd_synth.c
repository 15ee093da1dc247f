/* realpos synth: a synthetic length-generalisation task in the tagging format
 * (train/tasks/synth.h, docs/synthetic.md). Lengths are drawn uniformly from A-B, or with
 * --per-length each length gets --count examples (test files: equal counts per length). The file
 * is a pure function of (task, lengths, count, seed, per-length, distance). lookup takes
 * --distance D (the offset its labels are read from); the other tasks refuse it. */
#include <stdlib.h>
#include <string.h>

#include "core/io/atomic_file.h"
#include "core/io/paths.h"
#include "core/config/cli.h"
#include "core/common.h"
#include "train/cli/commands.h"
#include "train/tasks/synth.h"

/* "A-B" (or "A") into [*lo, *hi], each in [min, 65536]. */
static void parse_lengths(const char *text, int min, int *lo, int *hi) {
    char *end;
    long a = strtol(text, &end, 10), b = a;
    if (*end == '-')
        b = strtol(end + 1, &end, 10);
    RP_CHECK(*text && !*end && a >= min && b >= a && b <= 65536,
             "option '--lengths': expected A-B with %d <= A <= B <= 65536, got '%s'", min, text);
    *lo = (int)a;
    *hi = (int)b;
}

int cmd_synth(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *lengths = NULL, *count_text = NULL, *seed_text = "0", *out = NULL, *distance_text = NULL;
    int per_length = cli_take_flag(&argc, argv, "per-length");
    CliOption options[] = {{"lengths", &lengths}, {"count", &count_text}, {"seed", &seed_text}, {"out", &out},
                           {"distance", &distance_text}};
    CliArgs args = cli_parse(argc, argv, options, 5);
    RP_CHECK(args.num_positional == 1 && lengths && count_text && out && !args.num_sets, "usage: realpos %s", usage);
    int task = synth_task_find(args.positional[0]);
    RP_CHECK(task >= 0, "synth: unknown task '%s'; expected reverse, duplicate, odds_first, sort, binary_addition, "
             "mqar or lookup", args.positional[0]);
    int distance = 0;
    if (synth_task_has_distance((SynthTask)task)) {
        RP_CHECK(distance_text, "synth %s: option '--distance': expected the offset D its labels are read from "
                 "(1..%d), got nothing", args.positional[0], SYNTH_DISTANCE_MAX);
        distance = (int)cli_int("--distance", distance_text, 1, SYNTH_DISTANCE_MAX);
    } else {
        RP_CHECK(!distance_text, "synth %s: option '--distance' applies to lookup only, got '%s'", args.positional[0],
                 distance_text);
    }
    int lo, hi;
    parse_lengths(lengths, synth_min_length((SynthTask)task, distance), &lo, &hi);
    long count = (long)cli_int("--count", count_text, 1, 100000000);
    uint64_t seed = (uint64_t)cli_int("--seed", seed_text, 0, INT64_MAX);
    IoPlan plan;
    io_plan_init(&plan);
    io_plan_output(&plan, out, "--out");
    io_plan_check(&plan);
    Rng rng;
    rng_seed(&rng, seed);
    SynthExample ex = {0};
    AtomicFile file;
    FILE *f = atomic_file_open_or_die(&file, out);
    long total = 0;
    if (per_length) {
        for (int n = lo; n <= hi; n++)
            for (long i = 0; i < count; i++, total++) {
                synth_generate((SynthTask)task, n, distance, &rng, &ex);
                synth_write(f, &ex);
            }
    } else {
        for (long i = 0; i < count; i++, total++) {
            int n = lo + (int)rng_below(&rng, (uint64_t)(hi - lo + 1));
            synth_generate((SynthTask)task, n, distance, &rng, &ex);
            synth_write(f, &ex);
        }
    }
    atomic_file_commit_or_die(&file);
    synth_example_free(&ex);
    char distance_note[32] = "";
    if (distance)
        snprintf(distance_note, sizeof distance_note, " at distance %d", distance);
    rp_log("%s: %ld %s examples%s of length %d-%d (%s), seed %llu", out, total, args.positional[0], distance_note, lo,
           hi, per_length ? "--count per length" : "lengths uniform", (unsigned long long)seed);
    return 0;
}
