/* realpos: a training framework for BERT-style encoders with relative position embeddings and
 * residual attention. Subcommand dispatch. */
#include <stdio.h>
#include <string.h>

#include "core/dist.h"
#include "train/cli/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} Command;

static const Command commands[] = {
    {"config", cmd_config, "config CONFIG.ini [--set section.key=value ...]"},
    {"init", cmd_init, "init CONFIG.ini [--set ...] --out CKPT.h5"},
    {"inspect", cmd_inspect, "inspect [--verify] CKPT.h5"},
    {"average", cmd_average, "average CKPT.h5... --out OUT.h5 | average --last N RUN_DIR --out OUT.h5"},
    {"bench", cmd_bench, "bench CONFIG.ini [--set ...] --batch-size B --seq-len L [--steps N] [--json OUT]"},
    {"dump", cmd_dump, "dump --checkpoint CKPT.h5 --batch BATCH.h5 --out OUT.h5 [--train-steps N]"},
    {"tokenize", cmd_tokenize, "tokenize --vocab VOCAB.txt [--cased] [--tokens] < TEXT"},
    {"vocab", cmd_vocab, "vocab --corpus FILE... --size N --out VOCAB.txt [--cased]"},
    {"pretrain", cmd_pretrain, "pretrain CONFIG.ini [--set ...] [--resume CKPT | --init CKPT]"},
    {"eval", cmd_eval, "eval CONFIG.ini --checkpoint CKPT [--max-seq-len N] [--set ...]"},
    {"prepare", cmd_prepare, "prepare CONFIG.ini [--set section.key=value ...]"},
    {"finetune", cmd_finetune, "finetune CONFIG.ini [--set section.key=value ...] [--resume CKPT]"},
    {"predict", cmd_predict, "predict CONFIG.ini --checkpoint CKPT --input FILE --out FILE [--set ...]"},
    {"import-hf", cmd_import_hf, "import-hf DIR --out CKPT.h5 [--config-out FILE.ini]"},
    {"export-hf", cmd_export_hf, "export-hf CKPT.h5 --out DIR [--vocab VOCAB.txt]"},
    {"fill-mask", cmd_fill_mask, "fill-mask CKPT.h5 [--top-k 5] [--text TEXT] [--vocab VOCAB.txt] (else stdin lines)"},
    {"attention", cmd_attention, "attention CKPT.h5 --input FILE --out ATTN.h5 [--max-len N] [--vocab VOCAB.txt]"},
};

/* In the sanitizer build (make sanitize) LeakSanitizer checks for leaks when a command returns;
 * the leaks of error exits (RP_FATAL) are left to the OS. NULL in ordinary builds. */
void __lsan_do_leak_check(void) __attribute__((weak));

static void usage(FILE *out) {
    fprintf(out, "usage: realpos COMMAND ...\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  realpos %s\n", commands[i].usage);
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) {
            /* Only training is data-parallel; N copies of another command would race on its outputs. */
            int parallel = !strcmp(argv[1], "pretrain") || !strcmp(argv[1], "finetune");
            if (!parallel && dist_launched_size() > 1) {
                fprintf(stderr, "realpos: error: '%s' runs in one process; launch it without mpirun/srun (only "
                        "pretrain and finetune run on several ranks)\n", argv[1]);
                return 2;
            }
            int status = commands[i].run(argc - 1, argv + 1);
            if (__lsan_do_leak_check)
                __lsan_do_leak_check();
            return status;
        }
    fprintf(stderr, "realpos: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
