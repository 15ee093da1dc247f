/* Command-line arguments of the subcommands: named options from a table (`--name value` or
 * `--name=value`), repeatable `--set section.key=value` config overrides, and positional
 * arguments, in any order. */
#pragma once

#define CLI_MAX_SETS 64
#define CLI_MAX_POSITIONAL 64 /* e.g. the checkpoints `realpos average` takes */

typedef struct {
    const char *name;   /* without the leading "--", e.g. "out" */
    const char **value; /* receives the argument; left unchanged when the option is absent */
} CliOption;

typedef struct {
    char *sets[CLI_MAX_SETS]; /* "section.key=value" of each --set, in command-line order */
    int num_sets;
    char *positional[CLI_MAX_POSITIONAL];
    int num_positional;
} CliArgs;

/* Parses argv[1..argc-1]; argv[0] (the subcommand) names the command in messages. Fatal on an
 * unknown option, an option without its value, a named option given twice, or too many --set
 * or positional arguments. Returns the --set overrides and positional arguments. */
CliArgs cli_parse(int argc, char **argv, const CliOption *options, int num_options);

/* A flag without value (e.g. --overwrite): removes every `--name` from argv[1..*argc-1] (before
 * cli_parse) and returns whether it was there. "--name=..." is an error. */
int cli_take_flag(int *argc, char **argv, const char *name);

/* The integer value of an option, in [min, max]; fatal otherwise, naming the option. */
long long cli_int(const char *option, const char *text, long long min, long long max);
