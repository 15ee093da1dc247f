/* realpos prepare CONFIG.ini [--part I/N | --verify] [--set section.key=value ...]: tokenize the [data]
 * corpus into the shard set of [data] shard_dir (train/data/shard_set.h). With --part I/N this
 * process prepares the corpus files i with i % N == I; the part that finds every file done
 * writes the index (so does a plain `realpos prepare` afterwards, preparing nothing again). Every
 * process of an unfinished set must use the same N (shard_parts_claim). --verify prepares
 * nothing and verifies every shard of the set now (pretraining verifies each at its first read).
 * Tokenization runs on train.threads threads (0: all cores), as training does. */
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/config/cli.h"
#include "core/io/dir_lock.h"
#include "core/io/files.h"
#include "core/io/paths.h"
#include "train/cli/commands.h"
#include "train/config/config.h"
#include "train/data/corpus_prepare.h"
#include "train/data/shard.h"
#include "train/data/shard_parts.h"
#include "train/data/shard_set.h"
#include "train/data/shard_temp.h"

/* "I/N": two decimal integers, 0 <= I < N <= PREPARE_MAX_PARTS, nothing else (no sign, no
 * space, no overflow: 4294967297/2 is not 1/2). */
#define PREPARE_MAX_PARTS 1000000
static void parse_part(const char *text, int *part, int *num_parts) {
    const char *slash = strchr(text, '/');
    long value[2] = {-1, -1};
    for (int k = 0; k < 2 && slash; k++) {
        const char *from = k ? slash + 1 : text, *to = k ? text + strlen(text) : slash;
        size_t digits = strspn(from, "0123456789");
        if (digits == 0 || from + digits != to || digits > 7)
            break;
        value[k] = strtol(from, NULL, 10);
    }
    RP_CHECK(value[0] >= 0 && value[1] >= 1 && value[1] <= PREPARE_MAX_PARTS && value[0] < value[1],
             "--part: expected I/N, two whole numbers with 0 <= I < N <= %d (e.g. 0/4), got '%s'",
             PREPARE_MAX_PARTS, text);
    *part = (int)value[0];
    *num_parts = (int)value[1];
}

int cmd_prepare(int argc, char **argv) {
    const char *usage = command_usage(argv[0]);
    const char *part_text = NULL;
    int verify = cli_take_flag(&argc, argv, "verify");
    CliOption options[] = {{"part", &part_text}};
    CliArgs args = cli_parse(argc, argv, options, 1);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", usage);
    int part = 0, num_parts = 1;
    if (part_text)
        parse_part(part_text, &part, &num_parts);
    Config cfg;
    config_load(&cfg, JOB_PRETRAIN, args.positional[0], args.num_sets, args.sets);
    const DataConfig *d = &cfg.data;
    if (verify) { /* the whole set now, as pretraining's first reads would */
        RP_CHECK(!part_text, "--verify prepares nothing: give it without --part; usage: realpos %s", usage);
        char *vocab = read_file(d->vocab, NULL, "vocabulary ([data] vocab)");
        Shard *train, *eval;
        shard_set_open(d, vocab, strlen(vocab), d->vocab, &train, &eval);
        shard_verify(train);
        shard_free(train), shard_free(eval), free(vocab);
        return 0;
    }
    /* every path before any work (core/io/paths.h); an absent shard_dir is made by prepare */
    IoPlan *plan = xmalloc(sizeof *plan);
    io_plan_init(plan);
    io_plan_input(plan, args.positional[0], "the config");
    for (int i = 0; i < d->num_corpus; i++) {
        struct stat st;
        if (stat(d->corpus[i], &st) == 0 && S_ISDIR(st.st_mode))
            io_plan_input_dir(plan, d->corpus[i], "corpus folder ([data] corpus)");
        else if (stat(d->corpus[i], &st) == 0)
            io_plan_input(plan, d->corpus[i], "corpus file ([data] corpus)");
        /* else a glob, expanded (and each file checked) by corpus_prepare */
    }
    if (d->vocab[0])
        io_plan_input(plan, d->vocab, "vocabulary ([data] vocab)");
    io_plan_output_dir(plan, d->shard_dir, "[data] shard_dir");
    io_plan_check(plan);
    free(plan);
    /* one writer of the shard set: a whole prepare alone, or parts side by side, each part once */
    DirLock whole, own_part = {-1, ""};
    dir_lock_acquire_as(&whole, d->shard_dir, ".lock", num_parts > 1, "key 'data.shard_dir'");
    if (num_parts > 1) {
        char name[64];
        snprintf(name, sizeof name, ".lock-part-%d-of-%d", part, num_parts);
        dir_lock_acquire_as(&own_part, d->shard_dir, name, 0, "key 'data.shard_dir'");
    }
    if (cfg.train.threads > 0) /* the tokenizer's threads, as training's */
        omp_set_num_threads(cfg.train.threads);
    shard_temp_cleanup_on_signals(); /* a signal leaves no shard temporary behind */
    rp_log("prepare: %d corpus entr%s, vocab %s, %d thread%s%s", d->num_corpus,
           d->num_corpus == 1 ? "y" : "ies", d->vocab, omp_get_max_threads(),
           omp_get_max_threads() == 1 ? "" : "s", num_parts > 1 ? ", part" : "");
    PrepareReport r = corpus_prepare(d, part, num_parts);
    printf("sources: %d corpus files, %d kept from before; shards: %d written, %d kept; prepare_id %s\n",
           r.sources, r.sources_kept, r.shards_written, r.shards_kept, r.prepare_id);
    const SplitCounts *split[2] = {&r.train, &r.eval};
    const char *name[2] = {"train", "eval"};
    for (int i = 0; i < 2; i++)
        printf("%-5s %s: %lld documents, %lld sentences, %lld tokens\n", name[i], d->shard_dir,
               (long long)split[i]->documents, (long long)split[i]->sentences,
               (long long)split[i]->tokens);
    if (r.dropped_sentences)
        printf("dropped %lld lines that produced no token\n", (long long)r.dropped_sentences);
    if (r.bad_records)
        printf("bad records: %lld (named above), skipped\n", (long long)r.bad_records);
    printf("time: %.2f s (read %.2f, tokenize %.2f = %.2f M tokens/s, write %.2f), %.1f MB of text "
           "= %.1f MB/s\n",
           r.seconds_total, r.seconds_read, r.seconds_tokenize,
           (double)(r.bytes ? r.train.tokens + r.eval.tokens : 0) / 1e6 /
               (r.seconds_tokenize > 0 ? r.seconds_tokenize : 1e-9),
           r.seconds_write, (double)r.bytes / 1e6,
           (double)r.bytes / 1e6 / (r.seconds_total > 0 ? r.seconds_total : 1e-9));
    if (r.index_written)
        printf("index: %s/%s\n", d->shard_dir, SHARD_SET_INDEX);
    else
        printf("index: not yet written: other parts have corpus files to prepare\n");
    dir_lock_release(&own_part);
    dir_lock_release(&whole);
    return 0;
}
