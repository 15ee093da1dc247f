/* The realpos commands: one table of names, entry points, usage lines and option help, the only
 * place a command's usage is written (main.c prints it for `realpos`, `realpos --help` and
 * `realpos COMMAND --help`; every cmd_* names it in its usage errors via command_usage). */
#include <stdio.h>
#include <string.h>

#include "train/cli/commands.h"

#include "core/common.h"

static const Command commands[] = {
    {"config", cmd_config, "config CONFIG.ini [--set section.key=value ...] [--for pretrain|finetune]",
     "print the effective, validated configuration (every key with its type, range and origin)",
     "  --set section.key=value   override a key of CONFIG.ini (repeatable)\n"
     "  --for pretrain|finetune   as that command loads it: a --set of a key it does not read is refused,\n"
     "                            one in the file warned about\n"},
    {"prepare", cmd_prepare, "prepare CONFIG.ini [--part I/N | --verify] [--set section.key=value ...]",
     "tokenize the [data] corpus into the train and eval shards of [data] shard_dir",
     "  --part I/N                prepare the corpus files i with i % N == I (0 <= I < N) of the sorted\n"
     "                            list, as one of N processes sharing shard_dir; the last to finish\n"
     "                            writes the index\n"
     "  --set section.key=value   override a key (repeatable)\n"
     "  --verify                  prepare nothing: verify every shard of the set now (pretraining\n"
     "                            verifies each at its first read)\n"},
    {"pretrain", cmd_pretrain,
     "pretrain CONFIG.ini [--set section.key=value ...] [--resume RUN_DIR | --init CKPT] [--overwrite] [--verbose] | "
     "pretrain --resume RUN_DIR [--set ...]",
     "MLM pretraining into [train] run_dir",
     "  --set section.key=value   override a key (repeatable)\n"
     "  --resume CKPT             continue the run of this checkpoint (weights, optimizer, data position);\n"
     "                            RUN_DIR/latest or RUN_DIR name the run's newest; without CONFIG.ini the\n"
     "                            run continues with its stored configuration in the checkpoint's directory\n"
     "  --init CKPT               start a new run from this checkpoint's weights\n"
     "  --overwrite               move an old run in train.run_dir aside (RUN_DIR.replaced-DATE-TIME)\n"
     "  --verbose                 also print the whole configuration (RUN_DIR/config.ini) at the start\n"},
    {"eval", cmd_eval, "eval CONFIG.ini --checkpoint CKPT [--max-seq-len N] [--json OUT] [--set section.key=value ...]",
     "held-out MLM loss, accuracy and perplexity of a checkpoint",
     "  --checkpoint CKPT         the checkpoint to evaluate\n"
     "  --max-seq-len N           evaluate on sequences of N tokens (default: the config's)\n"
     "  --json OUT                also write the numbers to OUT at full precision (one JSON object)\n"
     "  --set section.key=value   override a key (repeatable)\n"},
    {"finetune", cmd_finetune,
     "finetune CONFIG.ini [--set section.key=value ...] [--resume RUN_DIR] [--overwrite] [--verbose] | "
     "finetune --resume RUN_DIR [--set ...]",
     "fine-tune a checkpoint on a GLUE or SQuAD task ([task]) into [train] run_dir",
     "  --set section.key=value   override a key (repeatable)\n"
     "  --resume CKPT             continue the fine-tuning run of this checkpoint (or RUN_DIR/latest, RUN_DIR);\n"
     "                            without CONFIG.ini with its stored configuration, in the checkpoint's directory\n"
     "  --overwrite               move an old run in train.run_dir aside (RUN_DIR.replaced-DATE-TIME)\n"
     "  --verbose                 also print the whole configuration and the parameter table (RUN_DIR/config.ini,\n"
     "                            RUN_DIR/parameters.txt) at the start\n"},
    {"predict", cmd_predict, "predict CONFIG.ini --checkpoint CKPT --input FILE --out FILE [--set ...]",
     "predictions of a fine-tuned checkpoint (and metrics when the input is labelled)",
     "  --checkpoint CKPT         a checkpoint written by realpos finetune (or its RUN_DIR, RUN_DIR/latest)\n"
     "  --input FILE              GLUE TSV or SQuAD JSON\n"
     "  --out FILE                predictions (TSV with prob_LABEL columns, or SQuAD predictions.json and\n"
     "                            nbest_predictions.json beside it)\n"
     "  --set section.key=value   override a key (repeatable)\n"},
    {"init", cmd_init, "init CONFIG.ini [--set section.key=value ...] --out CKPT.h5",
     "a freshly initialised checkpoint of the config's model",
     "  --out CKPT.h5             the checkpoint to write\n"
     "  --set section.key=value   override a key (repeatable)\n"},
    {"inspect", cmd_inspect, "inspect [--verify] CKPT.h5", "config and parameter table of a checkpoint",
     "  --verify                  verify the checksum and that every stored tensor is finite\n"},
    {"average", cmd_average, "average CKPT.h5... --out OUT.h5 | average --last N RUN_DIR --out OUT.h5",
     "the mean of checkpoints' weights (the same model, vocabulary and labels), weights only",
     "  --out OUT.h5              the averaged checkpoint to write\n"
     "  --last N                  average the N newest checkpoints (ckpt-STEP.h5) of RUN_DIR\n"},
    {"dump", cmd_dump, "dump --checkpoint CKPT.h5 --batch BATCH.h5 --out OUT.h5 [--train-steps N] [--precision P] "
     "[--padding P]",
     "one forward/backward (or N training steps) on a batch file, for parity tests",
     "  --checkpoint CKPT.h5      an MLM checkpoint\n"
     "  --batch BATCH.h5          input_ids, token_type_ids, attention_mask, labels [B, L]\n"
     "  --out OUT.h5              loss, logits and gradients (or the loss trajectory and final weights)\n"
     "  --train-steps N           AdamW steps instead of one gradient (default 0)\n"
     "  --precision P             fp32 (default) or bf16 matrix products (as train.precision)\n"
     "  --padding P               the batch's layout (data.padding): max_length (default, the file's [B, L]),\n"
     "                            longest, or none (unpadded: the real tokens back to back)\n"},
    {"attention", cmd_attention,
     "attention CKPT.h5 --input FILE --out ATTN.h5 [--max-len N] [--vocab VOCAB.txt] [--padding P]",
     "attention maps (and carried scores) per layer on sentences of text",
     "  --input FILE              one sentence per line\n"
     "  --out ATTN.h5             the maps to write\n"
     "  --max-len N               tokens per sentence at most (default 128)\n"
     "  --vocab VOCAB.txt         for a checkpoint without its vocabulary (must equal it otherwise)\n"
     "  --padding P               the batch of sentences: longest (default, padded to the longest),\n"
     "                            max_length (to --max-len) or none (unpadded; maps 0 outside each\n"
     "                            sentence's block)\n"},
    {"import-hf", cmd_import_hf, "import-hf DIR --out CKPT.h5 [--config-out FILE.ini]",
     "HuggingFace BERT folder (config.json, safetensors, vocab.txt) -> checkpoint",
     "  --out CKPT.h5             the checkpoint to write\n"
     "  --config-out FILE.ini     also write its configuration as an INI file\n"},
    {"export-hf", cmd_export_hf, "export-hf CKPT.h5 --out DIR [--vocab VOCAB.txt]",
     "checkpoint -> HuggingFace BERT folder",
     "  --out DIR                 a new folder (or an empty one), written whole or not at all\n"
     "  --vocab VOCAB.txt         for a checkpoint without its vocabulary (must equal it otherwise)\n"},
    {"fill-mask", cmd_fill_mask, "fill-mask CKPT.h5 [--top-k 5] [--text TEXT] [--vocab VOCAB.txt] [--precision P]",
     "top-k tokens for each [MASK] of --text, else of each line of standard input (each line run alone, "
     "unpadded, whatever the checkpoint's data.padding)",
     "  --top-k K                 tokens per mask (default 5)\n"
     "  --text TEXT               the text (else lines of standard input)\n"
     "  --vocab VOCAB.txt         for a checkpoint without its vocabulary (must equal it otherwise)\n"
     "  --precision P             fp32 (default) or bf16 matrix products (as train.precision)\n"},
    {"bench", cmd_bench,
     "bench CONFIG.ini [--set section.key=value ...] (--batch-size B --seq-len L [--label-frac F] | "
     "--lengths-from FILE [--batch-size B] [--seq-len L] | --from-shards DIR) [--against OTHER.ini] [--against-set KEY=VALUE] "
     "[--against-lengths-from FILE | --against-from-shards DIR] [--steps N] "
     "[--warmup W] [--probes every-step|start] [--json OUT]",
     "time training steps (and print the BLAS kernels in use)",
     "  --batch-size B            sequences per step (with --lengths-from: task.batch_size, the default)\n"
     "  --seq-len L               tokens per sequence (with --lengths-from: task.max_seq_len, the default)\n"
     "  --steps N                 steps to time (default 10)\n"
     "  --probes WHEN             peak probes after every step (every-step, default) or at start-up only\n"
     "                            (start: a profiler attached to the run samples only steps)\n"
     "  --warmup W                untimed steps first (default 2)\n"
     "  --label-frac F            synthetic MLM batch: fraction of positions labelled (default 0.15)\n"
     "  --lengths-from FILE       fine-tuning steps on the task's batches of FILE (GLUE TSV per task.glue_task,\n"
     "                            or SQuAD JSON with task.type = squad; tokenized with data.vocab, padded per\n"
     "                            task.padding, task.group_by_length): real and computed tokens/s\n"
     "  --from-shards DIR         pretraining steps on the training stream of the shard set DIR (prepared with\n"
     "                            the config's [data]; train.batch_size x data.max_seq_len, laid out per\n"
     "                            data.padding): real and computed tokens/s\n"
     "  --against OTHER.ini       also time OTHER.ini (same options), alternating step by step: the time\n"
     "                            ratio per step pair, robust to a shared machine's load\n"
     "  --against-set KEY=VALUE   one more --set for the paired side only (OTHER.ini defaults to CONFIG.ini):\n"
     "                            e.g. --set train.precision=bf16 --against-set train.precision=fp32\n"
     "  --against-lengths-from FILE  the paired side's own batch source, a task file as --lengths-from\n"
     "                            (OTHER.ini defaults to CONFIG.ini; the two sides' shapes may differ)\n"
     "  --against-from-shards DIR the paired side's own batch source, pretraining's shards as --from-shards:\n"
     "                            e.g. fine-tuning against pretraining, real tokens/s of both under one load\n"
     "  --json OUT                also write the timings as JSON\n"
     "  --set section.key=value   override a key (repeatable)\n"},
    {"synth", cmd_synth, "synth TASK --lengths A-B --count N [--seed S] [--per-length] [--distance D] --out FILE",
     "a synthetic task (reverse, duplicate, odds_first, sort, binary_addition, mqar, lookup) in the\n"
     "tagging format (docs/synthetic.md)",
     "  --lengths A-B             the task's lengths (A-B or A)\n"
     "  --count N                 examples (with --per-length: examples of each length)\n"
     "  --seed S                  seed of the draws (default 0); the file is a function of the arguments\n"
     "  --per-length              N examples of every length A..B (test files), else lengths uniform\n"
     "  --distance D              lookup only (required): word i is labelled with word i - D\n"
     "  --out FILE                the file to write (word label lines, a blank line after each example)\n"},
    {"tokenize", cmd_tokenize, "tokenize --vocab VOCAB.txt [--cased] [--tokens] < TEXT",
     "WordPiece ids (or tokens) of each line of standard input",
     "  --vocab VOCAB.txt         the vocabulary\n"
     "  --cased                   keep case and accents (default: lower-case, strip accents)\n"
     "  --tokens                  print the token strings instead of ids\n"},
    {"vocab", cmd_vocab, "vocab --corpus FILE... --size N --out VOCAB.txt [--cased]",
     "train a WordPiece vocabulary on corpus files",
     "  --corpus FILE...          the text files\n"
     "  --size N                  tokens in the vocabulary\n"
     "  --out VOCAB.txt           the vocabulary to write\n"
     "  --cased                   keep case and accents\n"},
};

const Command *command_table(int *count) {
    *count = (int)(sizeof commands / sizeof commands[0]);
    return commands;
}

const Command *command_find(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

const char *command_usage(const char *name) {
    const Command *c = command_find(name);
    return c ? c->usage : name;
}

void command_print_help(FILE *out, const Command *c) {
    fprintf(out, "usage: realpos %s\n\n%s\n\noptions:\n%s  --help                    print this help\n", c->usage,
            c->summary, c->options);
}

void command_print_list(FILE *out) {
    fprintf(out, "usage: realpos COMMAND ... | realpos COMMAND --help | realpos --version\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  realpos %s\n", commands[i].usage);
}

Precision cli_precision(const char *text) {
    if (!text)
        return PRECISION_FP32;
    for (int p = 0; precision_names[p]; p++)
        if (!strcmp(text, precision_names[p])) {
            gemm_require_precision((Precision)p, "--precision bf16");
            return (Precision)p;
        }
    RP_FATAL("option '--precision': expected fp32 or bf16, got '%s'", text);
}
