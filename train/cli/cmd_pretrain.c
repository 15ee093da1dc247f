/* realpos pretrain / eval: arguments and configuration; the loop is train/loop/pretrain.c. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "core/cli.h"
#include "core/common.h"
#include "core/h5io.h"
#include "train/cli/commands.h"
#include "train/loop/pretrain.h"
#include "train/model/checkpoint.h"

int cmd_pretrain(int argc, char **argv) {
    const char *usage = "pretrain CONFIG.ini [--set section.key=value ...] [--resume CKPT | --init CKPT]";
    const char *resume = NULL, *init = NULL;
    CliOption options[] = {{"resume", &resume}, {"init", &init}};
    CliArgs args = cli_parse(argc, argv, options, 2);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", usage);
    RP_CHECK(!(resume && init), "--resume and --init are exclusive; usage: realpos %s", usage);
    Trainer t;
    memset(&t, 0, sizeof t);
    dist_init(&t.dist, NULL, NULL); /* under mpirun/srun: this rank of the job */
    config_load(&t.cfg, args.positional[0], args.num_sets, args.sets);
    dist_set_threads(&t.dist, t.cfg.train.threads);
    t.config_ini = config_to_ini(&t.cfg);
    dist_require_same_text(&t.dist, t.config_ini, "effective configuration");
    if (dist_is_root(&t.dist))
        fprintf(stderr, "# effective configuration\n%s\n", t.config_ini);

    pretrain_setup(&t, args.positional[0], resume, init);
    int rc = pretrain_run(&t, resume != NULL);
    trainer_free(&t);
    dist_finalize(&t.dist);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    const char *usage = "eval CONFIG.ini --checkpoint CKPT [--max-seq-len N] [--set section.key=value ...]";
    const char *ckpt = NULL, *max_len = NULL;
    CliOption options[] = {{"checkpoint", &ckpt}, {"max-seq-len", &max_len}};
    CliArgs args = cli_parse(argc, argv, options, 2);
    RP_CHECK(args.num_positional == 1 && ckpt, "usage: realpos %s", usage);
    Trainer t;
    memset(&t, 0, sizeof t);
    config_load(&t.cfg, args.positional[0], args.num_sets, args.sets);
    if (t.cfg.train.threads > 0)
        omp_set_num_threads(t.cfg.train.threads);
    char *stored_ini;
    hid_t f = checkpoint_open(ckpt, &stored_ini);
    Config stored;
    config_load_string(&stored, stored_ini, ckpt);
    config_report_differences(&t.cfg, &stored, "model", ckpt, "eval uses the checkpoint's model");
    t.cfg.model = stored.model; /* the checkpoint defines the model */
    if (max_len)
        t.cfg.data.max_seq_len = (int)cli_int("--max-seq-len", max_len, 2, 1 << 16);
    RP_CHECK(!t.cfg.model.absolute_position || t.cfg.data.max_seq_len <= t.cfg.model.max_position,
             "--max-seq-len %d exceeds the checkpoint's model.max_position = %d (absolute positions)",
             t.cfg.data.max_seq_len, t.cfg.model.max_position);
    model_create(&t.model, &t.cfg.model, heads_mlm());
    checkpoint_load_model(f, ckpt, &t.model);
    int lower = t.cfg.data.do_lower_case;
    t.vocab_text = checkpoint_read_vocab(f, ckpt, &lower);
    h5_close(f, ckpt);
    free(stored_ini);
    if (!t.vocab_text)
        t.vocab_text = read_file(t.cfg.data.vocab, NULL, "vocabulary ([data] vocab)");
    t.cfg.data.do_lower_case = lower;
    trainer_open_data(&t, ckpt);
    activations_create(&t.acts, &t.model, t.cfg.train.batch_size, t.cfg.data.max_seq_len,
                       trainer_max_predictions(&t.cfg));
    EvalResult r = evaluate_mlm(&t.model, &t.acts, t.eval_stream, t.batch, t.cfg.train.eval_batches,
                                t.unigram_token, NULL);
    printf("eval %s: max_seq_len %d, %ld predictions: mlm loss %.4f, accuracy %.4f, perplexity %.2f "
           "(unigram baseline accuracy %.4f: always '%s')\n",
           ckpt, t.cfg.data.max_seq_len, r.predictions, r.loss, r.accuracy, r.perplexity, r.unigram_accuracy,
           tokenizer_token(t.tok, t.unigram_token));
    RP_CHECK(isfinite(r.loss), "%s: the held-out loss is %g: the model's outputs are not finite", ckpt, r.loss);
    trainer_free(&t);
    return 0;
}
