/* The expansion of [data] corpus entries into the list of files prepare reads (corpus_reader.h):
 * files, directories, globs and `**`. */
#include "train/data/corpus_list.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"

static void *resize(void *p, size_t bytes) {
    p = realloc(p, bytes);
    RP_CHECK(p, "out of memory listing the corpus files (%zu bytes)", bytes);
    return p;
}

/* ---- the list of corpus files ---------------------------------------------------------------- */

typedef struct {
    CorpusList list;
    int cap;
    dev_t *dev;
    ino_t *ino;
    const char **entry; /* [data] corpus entry each file came from */
} ListBuilder;

static void add_file(ListBuilder *b, const char *path, const char *entry) {
    struct stat st;
    RP_CHECK(stat(path, &st) == 0, "%s: cannot open corpus file ([data] corpus): %s", path,
             strerror(errno));
    RP_CHECK(S_ISREG(st.st_mode), "%s: corpus entry ([data] corpus) is not a regular file", path);
    RP_CHECK(access(path, R_OK) == 0, "%s: cannot open corpus file ([data] corpus): %s", path,
             strerror(errno));
    for (int i = 0; i < b->list.count; i++)
        RP_CHECK(b->dev[i] != st.st_dev || b->ino[i] != st.st_ino,
                 "[data] corpus lists one file twice: %s (from '%s') and %s (from '%s') are the same "
                 "file (device %llu, inode %llu)",
                 b->list.files[i].path, b->entry[i], path, entry, (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
    if (b->list.count == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->list.files = resize(b->list.files, (size_t)b->cap * sizeof *b->list.files);
        b->dev = resize(b->dev, (size_t)b->cap * sizeof *b->dev);
        b->ino = resize(b->ino, (size_t)b->cap * sizeof *b->ino);
        b->entry = resize(b->entry, (size_t)b->cap * sizeof *b->entry);
    }
    int i = b->list.count++;
    b->list.files[i] = (CorpusFile){xstrdup(path), (int64_t)st.st_size,
                                    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
    b->dev[i] = st.st_dev;
    b->ino[i] = st.st_ino;
    b->entry[i] = entry;
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file below dir (names starting with '.' skipped), sorted, into *paths. */
static void walk_directory(const char *dir, char ***paths, int *count, int *cap) {
    DIR *d = opendir(dir);
    RP_CHECK(d, "%s: cannot read corpus directory ([data] corpus): %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        size_t n = strlen(dir) + strlen(e->d_name) + 2;
        char *path = xmalloc(n);
        snprintf(path, n, "%s/%s", dir, e->d_name);
        struct stat st;
        RP_CHECK(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode)) {
            walk_directory(path, paths, count, cap);
            free(path);
        } else if (S_ISREG(st.st_mode)) {
            if (*count == *cap) {
                *cap = *cap ? 2 * *cap : 64;
                *paths = resize(*paths, (size_t)*cap * sizeof **paths);
            }
            (*paths)[(*count)++] = path;
        } else {
            free(path);
        }
    }
    closedir(d);
}

/* ---- `**` ------------------------------------------------------------------------------------ */

typedef struct {
    char **paths;
    int count, cap;
} PathList;

static void path_list_add(PathList *l, char *path) {
    if (l->count == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->paths = resize(l->paths, (size_t)l->cap * sizeof *l->paths);
    }
    l->paths[l->count++] = path;
}

static char *join(const char *base, const char *name) {
    size_t n = strlen(base) + strlen(name) + 2;
    char *path = xmalloc(n);
    snprintf(path, n, "%s%s%s", base, *base && base[strlen(base) - 1] != '/' ? "/" : "", name);
    return path;
}

static int is_globstar_entry(const char *entry) {
    for (const char *p = strstr(entry, "**"); p; p = strstr(p + 1, "**"))
        if ((p == entry || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
            return 1;
    return 0;
}

/* The paths below base (a directory; "" is the working directory) matching components
 * [i, n): `**` any number of directories (none included; symbolic links to directories are not
 * followed, so no loop), other components as fnmatch(3) with FNM_PERIOD (a leading '.' only
 * matched by a '.', as `*` in glob(3) and bash). */
static void expand_globstar(const char *base, char **comps, int i, int n, PathList *out, const char *entry) {
    struct stat st;
    if (i == n) {
        if (stat(base, &st) == 0 && S_ISREG(st.st_mode))
            path_list_add(out, xstrdup(base));
        return;
    }
    const char *comp = comps[i];
    int star = !strcmp(comp, "**");
    if (star)
        expand_globstar(base, comps, i + 1, n, out, entry);
    else if (!strpbrk(comp, "*?[")) {
        char *next = join(base, comp);
        if (lstat(next, &st) == 0)
            expand_globstar(next, comps, i + 1, n, out, entry);
        free(next);
        return;
    }
    DIR *d = opendir(*base ? base : ".");
    if (!d) {
        RP_CHECK(errno == ENOENT || errno == ENOTDIR, "[data] corpus: '%s': cannot read directory %s: %s", entry,
                 *base ? base : ".", strerror(errno));
        return;
    }
    char **names = NULL;
    int count = 0, cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || (!star && fnmatch(comp, e->d_name, FNM_PERIOD)))
            continue;
        if (count == cap) {
            cap = cap ? 2 * cap : 64;
            names = resize(names, (size_t)cap * sizeof *names);
        }
        names[count++] = xstrdup(e->d_name);
    }
    closedir(d);
    if (count) /* qsort(NULL, 0, ...) is undefined */
        qsort(names, (size_t)count, sizeof *names, compare_strings);
    for (int k = 0; k < count; k++) {
        char *next = join(base, names[k]);
        if (!star)
            expand_globstar(next, comps, i + 1, n, out, entry);
        else if (lstat(next, &st) == 0 && S_ISDIR(st.st_mode))
            expand_globstar(next, comps, i, n, out, entry);
        free(next);
        free(names[k]);
    }
    free(names);
}

/* The regular files an entry with a `**` component matches, sorted, each once. */
static PathList globstar(const char *entry) {
    char *pattern = xstrdup(entry), *comps[256], *save = NULL;
    int n = 0;
    for (char *c = strtok_r(pattern, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        RP_CHECK(n < 256, "[data] corpus: '%s': more than 256 path components", entry);
        comps[n++] = c;
    }
    PathList out = {0};
    expand_globstar(entry[0] == '/' ? "/" : "", comps, 0, n, &out, entry);
    free(pattern);
    if (out.count)
        qsort(out.paths, (size_t)out.count, sizeof *out.paths, compare_strings);
    int kept = 0;
    for (int k = 0; k < out.count; k++) { /* a ** after a ** reaches a file by several paths */
        if (kept && !strcmp(out.paths[kept - 1], out.paths[k]))
            free(out.paths[k]);
        else
            out.paths[kept++] = out.paths[k];
    }
    out.count = kept;
    return out;
}

CorpusList corpus_list_expand(const DataConfig *data) {
    ListBuilder b = {0};
    for (int e = 0; e < data->num_corpus; e++) {
        const char *entry = data->corpus[e];
        struct stat st;
        if (is_globstar_entry(entry) && stat(entry, &st) != 0) {
            PathList found = globstar(entry);
            RP_CHECK(found.count > 0, "[data] corpus: '%s' matches no file", entry);
            for (int i = 0; i < found.count; i++) {
                add_file(&b, found.paths[i], entry);
                free(found.paths[i]);
            }
            free(found.paths);
        } else if (strpbrk(entry, "*?[") && stat(entry, &st) != 0) {
            glob_t g;
            int rc = glob(entry, GLOB_ERR, NULL, &g);
            RP_CHECK(rc == 0, "[data] corpus: '%s' matches no file", entry);
            for (size_t i = 0; i < g.gl_pathc; i++)
                add_file(&b, g.gl_pathv[i], entry); /* glob sorts */
            globfree(&g);
        } else if (stat(entry, &st) == 0 && S_ISDIR(st.st_mode)) {
            char **paths = NULL;
            int count = 0, cap = 0;
            walk_directory(entry, &paths, &count, &cap);
            RP_CHECK(count > 0, "%s: corpus directory ([data] corpus) holds no file", entry);
            qsort(paths, (size_t)count, sizeof *paths, compare_strings);
            for (int i = 0; i < count; i++) {
                add_file(&b, paths[i], entry);
                free(paths[i]);
            }
            free(paths);
        } else {
            add_file(&b, entry, entry);
        }
    }
    free(b.dev), free(b.ino), free(b.entry);
    return b.list;
}

void corpus_list_free(CorpusList *list) {
    for (int i = 0; i < list->count; i++)
        free(list->files[i].path);
    free(list->files);
    *list = (CorpusList){0};
}
