/* main() for the gcc builds of the fuzz harnesses (build/fuzz/replay_TARGET, no clang needed):
 * feeds each file named on the command line, or each file of each directory named, to
 * LLVMFuzzerTestOneInput, in name order. A crash or abort of the harness fails the replay. Used
 * by tests/train/cli/test_fuzz_replay.sh on tests/fuzz/regressions/TARGET and the seed inputs.
 *   replay_TARGET FILE_OR_DIR...  */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/common.h"
#include "core/io/files.h"
#include "tests/fuzz/fuzz.h"

static int replay_file(const char *path) {
    size_t size;
    char *data = read_file(path, &size, "fuzz input");
    LLVMFuzzerTestOneInput((const uint8_t *)data, size);
    free(data);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv) {
    int replayed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        RP_CHECK(stat(argv[i], &st) == 0, "%s: no such file or directory", argv[i]);
        if (!S_ISDIR(st.st_mode)) {
            replayed += replay_file(argv[i]);
            continue;
        }
        struct dirent **entries;
        int n = scandir(argv[i], &entries, NULL, by_name);
        RP_CHECK(n >= 0, "%s: cannot list the directory", argv[i]);
        for (int e = 0; e < n; e++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], entries[e]->d_name);
            if (entries[e]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
                replayed += replay_file(path);
            free(entries[e]);
        }
        free(entries);
    }
    printf("replayed %d inputs\n", replayed);
    return 0;
}
