/* realpos config: print the effective configuration (defaults, file, --set overrides), validated,
 * as INI text that reads back to the same configuration. */
#include <string.h>

#include "core/cli.h"
#include "core/common.h"
#include "train/config/config.h"
#include "train/cli/commands.h"

int cmd_config(int argc, char **argv) {
    CliArgs args = cli_parse(argc, argv, NULL, 0);
    RP_CHECK(args.num_positional == 1, "usage: realpos %s", command_usage(argv[0]));
    Config *cfg = xmalloc(sizeof *cfg);
    config_load(cfg, JOB_NONE, args.positional[0], args.num_sets, args.sets);
    char *text = config_to_ini(cfg);
    fputs(text, stdout);
    free(text);
    free(cfg);
    return 0;
}
