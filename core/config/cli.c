/* Subcommand argument parsing (see cli.h). */
#include "core/config/cli.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "core/common.h"

CliArgs cli_parse(int argc, char **argv, const CliOption *options, int num_options) {
    CliArgs args = {.num_sets = 0};
    bool seen[64] = {false};
    RP_CHECK(num_options <= 64, "%s: too many options in the option table", argv[0]);
    bool options_ended = false; /* after "--" every argument is positional */
    for (int i = 1; i < argc; i++) {
        char *arg = argv[i];
        if (!options_ended && !strcmp(arg, "--")) {
            options_ended = true;
            continue;
        }
        if (options_ended || strncmp(arg, "--", 2) != 0) {
            RP_CHECK(options_ended || arg[0] != '-' || arg[1] == '\0', "%s: unknown option '%s'",
                     argv[0], arg);
            RP_CHECK(args.num_positional < CLI_MAX_POSITIONAL, "%s: more than %d arguments",
                     argv[0], CLI_MAX_POSITIONAL);
            args.positional[args.num_positional++] = arg;
            continue;
        }
        /* "--name value" or "--name=value" */
        const char *name = arg + 2;
        char *equals = strchr(name, '=');
        int name_length = (int)(equals ? (size_t)(equals - name) : strlen(name));
        bool is_set = name_length == 3 && !strncmp(name, "set", 3);
        int o = 0;
        while (!is_set && o < num_options &&
               !((int)strlen(options[o].name) == name_length &&
                 !strncmp(options[o].name, name, (size_t)name_length)))
            o++;
        RP_CHECK(is_set || o < num_options, "%s: unknown option '--%.*s'", argv[0], name_length,
                 name);
        char *value = equals ? equals + 1 : i + 1 < argc ? argv[++i] : NULL;
        RP_CHECK(value, "%s: option '--%.*s' expects a value", argv[0], name_length, name);
        if (is_set) {
            RP_CHECK(args.num_sets < CLI_MAX_SETS, "%s: more than %d --set options", argv[0],
                     CLI_MAX_SETS);
            args.sets[args.num_sets++] = value;
            continue;
        }
        RP_CHECK(!seen[o], "%s: option '--%s' given twice", argv[0], options[o].name);
        seen[o] = true;
        *options[o].value = value;
    }
    return args;
}

int cli_take_flag(int *argc, char **argv, const char *name) {
    int found = 0, kept = 1, options_ended = 0;
    size_t n = strlen(name);
    for (int i = 1; i < *argc; i++) {
        const char *arg = argv[i];
        options_ended |= !strcmp(arg, "--"); /* after "--" every argument is positional */
        int named = !options_ended && !strncmp(arg, "--", 2) && !strncmp(arg + 2, name, n);
        RP_CHECK(!named || arg[2 + n] != '=', "%s: option '--%s' takes no value", argv[0], name);
        if (named && arg[2 + n] == '\0')
            found = 1;
        else
            argv[kept++] = argv[i];
    }
    *argc = kept;
    return found;
}

long long cli_int(const char *option, const char *text, long long min, long long max) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    RP_CHECK(*text && !*end && errno == 0 && v >= min && v <= max,
             "option '%s': expected an integer in [%lld, %lld], got '%s'", option, min, max, text);
    return v;
}
