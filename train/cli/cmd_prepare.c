/* realpos prepare CONFIG.ini [--set section.key=value ...]: tokenize the [data] corpus into the
 * train and eval shards of [data] shard_dir (see train/corpus.h). */
#include <omp.h>
#include <sys/stat.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "train/cli/commands.h"
#include "train/data/corpus.h"

int cmd_prepare(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    CliArgs args = cli_parse(argc, argv, NULL, 0);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", usage);
    Config cfg;
    config_load(&cfg, args.positional[0], args.num_sets, args.sets);
    const DataConfig *d = &cfg.data;
    /* every path before any work (core/paths.h); an absent shard_dir is made by prepare */
    IoPlan *plan = xmalloc(sizeof *plan);
    char shards[2][CONFIG_PATH_MAX + 16];
    io_plan_init(plan);
    io_plan_input(plan, args.positional[0], "the config");
    for (int i = 0; i < d->num_corpus; i++)
        io_plan_input(plan, d->corpus[i], "corpus file ([data] corpus)");
    if (d->vocab[0])
        io_plan_input(plan, d->vocab, "vocabulary ([data] vocab)");
    struct stat st;
    if (stat(d->shard_dir, &st) == 0) {
        shard_path(shards[0], sizeof shards[0], d->shard_dir, "train");
        shard_path(shards[1], sizeof shards[1], d->shard_dir, "eval");
        io_plan_output(plan, shards[0], "a shard ([data] shard_dir)");
        io_plan_output(plan, shards[1], "a shard ([data] shard_dir)");
    } else {
        io_plan_output_dir(plan, d->shard_dir, "[data] shard_dir");
    }
    io_plan_check(plan);
    free(plan);
    rp_log("prepare: %d corpus file%s, vocab %s, %d threads", d->num_corpus,
           d->num_corpus == 1 ? "" : "s", d->vocab, omp_get_max_threads());
    PrepareReport r = corpus_prepare(d);
    double total = r.seconds_read + r.seconds_tokenize + r.seconds_write;
    const SplitCounts *split[2] = {&r.train, &r.eval};
    const char *name[2] = {"train", "eval"};
    for (int i = 0; i < 2; i++) {
        char path[CONFIG_PATH_MAX + 16];
        shard_path(path, sizeof path, d->shard_dir, name[i]);
        printf("%-5s %s: %lld documents, %lld sentences, %lld tokens\n", name[i], path,
               (long long)split[i]->documents, (long long)split[i]->sentences,
               (long long)split[i]->tokens);
    }
    if (r.dropped_sentences)
        printf("dropped %lld lines that produced no token\n", (long long)r.dropped_sentences);
    double tokens = (double)(r.train.tokens + r.eval.tokens);
    printf("time: %.2f s (read %.2f, tokenize %.2f = %.2f M tokens/s, write %.2f)\n", total,
           r.seconds_read, r.seconds_tokenize,
           tokens / 1e6 / (r.seconds_tokenize > 0 ? r.seconds_tokenize : 1e-9), r.seconds_write);
    return 0;
}
