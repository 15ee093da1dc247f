/* train/cli/: the `realpos` command line and nothing else: main.c dispatches, through the command
 * table of commands.c (names, usage lines, option help), to one cmd_* per subcommand
 * (cmd_pretrain.c: pretrain, eval; cmd_finetune.c: finetune, predict; cmd_model.c: init, inspect,
 * dump; ...), each parsing its arguments, checking its paths (core/io/paths.h) and calling the wings
 * below (loop, tasks, model, data).
 *
 * Subcommands of the realpos CLI; each returns the process exit status. argv[0] is the
 * subcommand name. */
#pragma once
#include <stdio.h>

#include "core/gemm.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;   /* "init CONFIG.ini [--set ...] --out CKPT.h5" (without "realpos ") */
    const char *summary; /* one line */
    const char *options; /* one "  --name VALUE   help" line per option */
} Command;

/* The command table (commands.c): every command's usage is written there and only there. */
const Command *command_table(int *count);
const Command *command_find(const char *name); /* NULL if unknown */
/* The usage line of a command (argv[0] of a cmd_*), for "usage: realpos %s" errors. */
const char *command_usage(const char *name);
/* `realpos COMMAND --help`: usage, summary and options. */
void command_print_help(FILE *out, const Command *c);
/* Every command's usage line. */
void command_print_list(FILE *out);
/* The value of --precision (fp32 for NULL) of the commands that take no training config;
 * fatal for another value, or for bf16 on a CPU without it (before anything is allocated). */
Precision cli_precision(const char *text);

int cmd_config(int argc, char **argv);   /* print the effective configuration */
int cmd_init(int argc, char **argv);     /* fresh checkpoint */
int cmd_inspect(int argc, char **argv);  /* config + parameter table of a checkpoint */
int cmd_average(int argc, char **argv);  /* mean of several checkpoints' weights */
int cmd_dump(int argc, char **argv);     /* one forward/backward on a batch file */
int cmd_bench(int argc, char **argv);    /* time training steps */
int cmd_tokenize(int argc, char **argv); /* WordPiece ids of stdin lines */
int cmd_vocab(int argc, char **argv);    /* train a WordPiece vocabulary */
int cmd_prepare(int argc, char **argv);  /* corpus text -> tokenized train/eval shards */
int cmd_pretrain(int argc, char **argv); /* MLM pretraining loop */
int cmd_eval(int argc, char **argv);     /* held-out MLM evaluation of a checkpoint */
int cmd_finetune(int argc, char **argv); /* fine-tune a checkpoint on a GLUE or SQuAD task */
int cmd_predict(int argc, char **argv);  /* predictions of a fine-tuned checkpoint */
int cmd_attention(int argc, char **argv); /* attention maps of a checkpoint on text */
int cmd_import_hf(int argc, char **argv); /* HuggingFace BERT folder -> checkpoint */
int cmd_export_hf(int argc, char **argv); /* checkpoint -> HuggingFace BERT folder */
int cmd_fill_mask(int argc, char **argv); /* top-k tokens for [MASK] in text */
int cmd_synth(int argc, char **argv);     /* synthetic tagging tasks */
