/* realpos config: print the effective configuration (defaults, file, --set overrides), validated,
 * as INI text that reads back to the same configuration. With --for JOB, the configuration as that
 * job loads it: its cross-key checks only, and the keys it does not read refused from --set and
 * warned about from the file, as the job's launch does (without a checkpoint: a fine-tuning
 * launch checks [model] conditions again on the init checkpoint's model). */
#include <string.h>

#include "core/config/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "train/cli/commands.h"

int cmd_config(int argc, char **argv) {
    const char *job_name = NULL;
    CliOption options[] = {{"for", &job_name}};
    CliArgs args = cli_parse(argc, argv, options, 1);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", command_usage(argv[0]));
    unsigned job = JOB_NONE;
    if (job_name) {
        RP_CHECK(!strcmp(job_name, "pretrain") || !strcmp(job_name, "finetune"),
                 "option '--for': expected pretrain or finetune, got '%s'", job_name);
        job = !strcmp(job_name, "pretrain") ? JOB_PRETRAIN : JOB_FINETUNE;
    }
    Config *cfg = xmalloc(sizeof *cfg);
    if (job == JOB_FINETUNE)
        config_load_task(cfg, args.positional[0], args.num_sets, args.sets);
    else
        config_load(cfg, job, args.positional[0], args.num_sets, args.sets);
    if (job != JOB_NONE)
        config_report_job(cfg);
    char *text = config_to_ini(cfg);
    fputs(text, stdout);
    free(text);
    free(cfg);
    return 0;
}
