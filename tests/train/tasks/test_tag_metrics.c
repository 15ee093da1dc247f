/* Tagging metrics (train/tasks/tag_metrics.c): accuracies and seqeval-style entity chunks on
 * hand-worked cases. With a file argument (tests/train/tasks/test_tag_metrics.sh) it prints
 * "right predicted gold" entity counts of the sequences in it (seqeval_reference.py's format) for
 * the comparison with the Python reference. */
#include <math.h>
#include <string.h>

#include "core/common.h"
#include "core/io/files.h"
#include "train/tasks/tag_metrics.h"
#include "tests/check.h"

static int index_of(const TagLabels *ls, const char *name) {
    for (int i = 0; i < ls->count; i++)
        if (!strcmp(ls->names[i], name))
            return i;
    RP_FATAL("label '%s' not in the set", name);
}

/* "B-PER I-PER O" into label indices; returns the count. */
static int parse(const TagLabels *ls, const char *text, int *out) {
    char *copy = xstrdup(text), *save = NULL;
    int n = 0;
    for (char *w = strtok_r(copy, " \n", &save); w; w = strtok_r(NULL, " \n", &save))
        out[n++] = index_of(ls, w);
    free(copy);
    return n;
}

static int score_file(const char *path) {
    size_t len;
    char *text = read_file(path, &len, "test sequences"), *save = NULL;
    char *line = strtok_r(text, "\n", &save);
    TagLabels ls;
    tag_labels_parse(&ls, line, path);
    TagScores s;
    tag_scores_init(&s);
    int gold[256], pred[256];
    while ((line = strtok_r(NULL, "\n", &save))) {
        char *bar = strchr(line, '|');
        *bar = 0;
        int n = parse(&ls, line, gold), m = parse(&ls, bar + 1, pred);
        RP_CHECK(n == m, "%s: a sequence with %d gold and %d predicted tags", path, n, m);
        tag_scores_add(&s, &ls, gold, pred, n, 1);
    }
    printf("%ld %ld %ld\n", s.entities_right, s.entities_predicted, s.entities_gold);
    tag_scores_free(&s);
    free(text);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2)
        return score_file(argv[1]);
    TestTally t = {0, 0};
    TagLabels ls;
    tag_labels_parse(&ls, "B-LOC B-PER I-LOC I-PER O", "test");
    CHECK(&t, ls.bio && ls.count == 5, "a BIO label set is recognised");
    TagLabels plain;
    tag_labels_parse(&plain, "0 1", "test");
    CHECK(&t, !plain.bio, "digits are no BIO label set");
    int seq[16], chunks[48];
    /* seqeval's get_entities(['B-PER','I-PER','O','I-LOC','I-LOC','B-LOC','I-PER']):
     * [('PER',0,1), ('LOC',3,4), ('LOC',5,5), ('PER',6,6)] */
    int n = parse(&ls, "B-PER I-PER O I-LOC I-LOC B-LOC I-PER", seq);
    int k = tag_chunks(&ls, seq, n, chunks);
    int want[] = {1, 0, 1, 0, 3, 4, 0, 5, 5, 1, 6, 6}; /* types by B- index: B-LOC 0, B-PER 1 */
    int same = k == 4;
    for (int i = 0; same && i < 4; i++)
        same = !strcmp(ls.names[chunks[3 * i]] + 2, ls.names[want[3 * i]] + 2) && chunks[3 * i + 1] == want[3 * i + 1] &&
               chunks[3 * i + 2] == want[3 * i + 2];
    CHECK(&t, same, "chunks: B-PER I-PER | I-LOC after O starts LOC | B-LOC | I-PER after LOC starts PER (%d found)", k);
    n = parse(&ls, "I-PER I-LOC", seq);
    CHECK(&t, tag_chunks(&ls, seq, n, chunks) == 2, "I- at the start, then I- of another type: two entities");
    /* gold PER(0,1) LOC(3,3); predicted PER(0,0) LOC(3,3): 1 right of 2 predicted, 2 gold */
    int gold[5], pred[5];
    parse(&ls, "B-PER I-PER O B-LOC O", gold);
    parse(&ls, "B-PER O O B-LOC O", pred);
    TagScores s;
    tag_scores_init(&s);
    tag_scores_add(&s, &ls, gold, pred, 5, 1);
    CHECK(&t, s.entities_right == 1 && s.entities_predicted == 2 && s.entities_gold == 2 && fabs(tag_f1(&s) - 0.5) < 1e-12,
          "entity P = R = F1 = 1/2 for one of two spans exactly right");
    CHECK(&t, s.all.words == 5 && s.all.words_right == 4 && s.all.sequences_right == 0,
          "token accuracy 4/5, the sequence wrong");
    int g2[3] = {-1, 0, 1}, p2[3] = {1, 0, 1}; /* the unscored word does not count */
    tag_scores_add(&s, &plain, g2, p2, 3, 0);
    CHECK(&t, s.beyond.words == 2 && s.beyond.words_right == 2 && s.beyond.sequences_right == 1 &&
              s.in_range.sequences == 1 && s.by_length[3].sequences == 1 && s.by_length[5].sequences == 1,
          "unscored words skipped; the in-range / beyond and per-length buckets");
    tag_scores_free(&s);
    return tally_exit(&t);
}
