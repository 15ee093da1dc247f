/* Fuzz target: the INI config loader (core/config.c through inih and the schema). The input is
 * a config file. A file that loads must print (config_to_ini) as text that loads again to the
 * same printed text; any other file must end in an error exit, never a crash. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/config/config.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_setup();
    static Config cfg, again;
    const char *path = fuzz_write_file(data, size, ".ini");
    char *volatile printed = NULL;
    volatile int reparsing = 0;
    fuzz_begin();
    if (setjmp(fuzz_jump) == 0) {
        config_load(&cfg, JOB_NONE, path, 0, NULL);
        printed = config_to_ini(&cfg);
        reparsing = 1;
        config_load_string(&again, printed, "printed config");
        char *printed_again = config_to_ini(&again);
        FUZZ_REQUIRE(!strcmp(printed, printed_again), "config: the printed config prints differently after reloading");
        free(printed_again);
        free(printed);
        fuzz_end();
    } else {
        FUZZ_REQUIRE(!reparsing, "config: a loaded config's printed form does not load:\n%s", printed);
        fuzz_recover();
    }
    return 0;
}
