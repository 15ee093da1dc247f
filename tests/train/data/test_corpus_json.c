/* The JSON reader of corpus records, config.json and SQuAD (core/io/json.h) and the line rules of
 * corpus text (train/data/corpus_round.h): RFC 8259 grammar cases (each one's verdict is Python's
 * json.loads, except NaN, a Python extension outside the RFC; repeated keys are refused on top),
 * string decoding (\u0000 kept,
 * surrogate pairs joined, lone surrogates U+FFFD), repeated keys in small and large objects and
 * behind escapes, the nesting limit, the tree reader's refusals, whitespace as str.isspace(),
 * and the line bound of a round. With --records it reads records (separated by 0x01) on stdin and
 * prints each one's verdict and the hex of its member "t" instead: test_corpus_json.sh compares
 * that with Python's json.loads on mutated records. */
#include <stdint.h>
#include <string.h>

#include "core/common.h"
#include "core/io/json.h"
#include "tests/check.h"
#include "tests/child.h"
#include "train/data/corpus_round.h"

static void test_grammar(TestTally *t) {
    static const struct {
        const char *text;
        int valid; /* json.loads(text) succeeds (Python 3.11), NaN aside */
    } cases[] = {
        {"{}", 1}, {" {\"a\": [1, -2.5e+3, 0, true, false, null, \"x\"]}\n", 1}, {"\"\\u00e9\\/\\b\\f\\n\\r\\t\"", 1},
        {"[]", 1}, {"0", 1}, {"-0.0E-0", 1}, {"\"\\ud800\"", 1}, {"\"\\udc00\\ud800\"", 1}, {"{\"a\":{\"a\":1}}", 1},
        {"", 0}, {"{", 0}, {"{\"a\" 1}", 0}, {"{\"a\":1,}", 0}, {"[1,]", 0}, {"01", 0}, {"1.", 0}, {".5", 0},
        {"1e", 0}, {"+1", 0}, {"\"a\tb\"", 0}, {"\"\\x41\"", 0}, {"\"\\u12\"", 0}, {"\"abc", 0}, {"tru", 0},
        {"{'a': 1}", 0}, {"{\"a\":1}{\"b\":2}", 0}, {"[1] x", 0}, {"NaN", 0}, {"{\"a\":1 \"b\":2}", 0},
    };
    int agree = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n; i++) {
        JsonError e;
        int got = json_check(cases[i].text, strlen(cases[i].text), NULL, NULL, &e) != JSON_INVALID;
        if (got == cases[i].valid)
            agree++;
        else
            printf("  case '%s': expected %s, got %s (%s)\n", cases[i].text, cases[i].valid ? "valid" : "invalid",
                   got ? "valid" : "invalid", got ? "" : e.message);
    }
    CHECK(t, agree == n, "json_check agrees with RFC 8259 (and Python's json.loads but for NaN) on %d of %d grammar cases",
          agree, n);
    JsonError e;
    const char *two = "{\"text\": \"a\"}{\"text\": \"b\"}";
    CHECK(t, !json_check(two, strlen(two), NULL, NULL, &e) && e.kind == JSON_ERROR_TRAILING && e.at == 13,
          "two records on one line: trailing data at byte 13 (got kind %d at %zu)", (int)e.kind, e.at);
}

/* The value of member `name` of the object text, decoded, into out; its length or -1. */
static long member_text(const char *text, const char *name, char *out) {
    JsonMember m = {name, strlen(name), JSON_INVALID, 0, 0};
    if (json_check(text, strlen(text), &m, NULL, NULL) != JSON_OBJECT || m.kind != JSON_STRING)
        return -1;
    return (long)json_string_decode(text + m.at, m.len, out);
}

static void test_decode(TestTally *t) {
    char out[256];
    const char *nul = "{\"id\": 1, \"text\": \"before\\u0000after\", \"n\": {\"text\": 2}}";
    long n = member_text(nul, "text", out);
    CHECK(t, n == 12 && !memcmp(out, "before\0after", 12), "\\u0000: a NUL byte inside the text, the rest kept (%ld bytes)", n);
    size_t first_nul;
    json_check(nul, strlen(nul), NULL, &first_nul, NULL);
    CHECK(t, first_nul == 25, "json_check reports the first \\u0000 at byte 25 (got %zu)", first_nul);
    n = member_text("{\"text\": \"\\ud83d\\ude00 \\ud800 \\udc00\\ud800x \\u00e9\\\"\\\\\\n\"}", "text", out);
    const char want[] = "\xF0\x9F\x98\x80 \xEF\xBF\xBD \xEF\xBF\xBD\xEF\xBF\xBDx \xC3\xA9\"\\\n";
    CHECK(t, n == (long)sizeof want - 1 && !memcmp(out, want, sizeof want - 1),
          "a surrogate pair is one character, each lone surrogate U+FFFD, escapes decoded (%ld bytes)", n);
    CHECK(t, member_text("{\"body\": \"x\"}", "text", out) == -1 && member_text("{\"text\": 3}", "text", out) == -1,
          "a missing or non-string member is not a text");
}

static void test_repeated_keys(TestTally *t) {
    JsonError e;
    const char *escaped = "{\"text\": \"a\", \"t\\u0065xt\": \"b\"}";
    CHECK(t, !json_check(escaped, strlen(escaped), NULL, NULL, &e) && e.kind == JSON_ERROR_DUPLICATE_KEY && e.at == 14 &&
              strstr(e.message, "key 'text' appears twice in the top-level object"),
          "a key repeated behind an escape is refused at its second occurrence (byte %zu: %s)", e.at, e.message);
    char big[4096];
    int len = snprintf(big, sizeof big, "{\"outer\": {");
    for (int i = 0; i < 40; i++)
        len += snprintf(big + len, sizeof big - (size_t)len, "\"k%d\": [%d], ", i, i);
    len += snprintf(big + len, sizeof big - (size_t)len, "\"k17\": 0}}");
    CHECK(t, !json_check(big, (size_t)len, NULL, NULL, &e) && e.kind == JSON_ERROR_DUPLICATE_KEY &&
              strstr(e.message, "key 'k17' appears twice in the object of key 'outer'") && e.at == (size_t)len - 10,
          "41 keys (sorted check): the repeated 'k17' named with its enclosing key, at its second place (%s)", e.message);
    const char *apart = "{\"a\": {\"x\": 1}, \"b\": {\"x\": 2}, \"x\": 3}";
    CHECK(t, json_check(apart, strlen(apart), NULL, NULL, &e) == JSON_OBJECT, "the same key in different objects is fine");
}

static void test_depth(TestTally *t) {
    char text[2 * 600 + 1];
    for (int depth = 500; depth <= 600; depth += 100) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        JsonError e;
        JsonKind kind = json_check(text, 2 * (size_t)depth, NULL, NULL, &e);
        CHECK(t, (kind == JSON_ARRAY) == (depth <= JSON_MAX_DEPTH), "%d nested arrays: %s", depth,
              kind ? "accepted" : e.message);
    }
}

static void parse_nul(const void *arg) {
    (void)arg;
    const char *text = "{\n  \"label\": \"a\\u0000b\"\n}";
    json_parse_strict(text, strlen(text), "config.json", "HuggingFace config");
}

static void parse_repeated(const void *arg) {
    (void)arg;
    const char *text = "{\"data\": [{\"title\": \"x\",\n \"title\": \"y\"}]}";
    json_parse_strict(text, strlen(text), "train.json", "SQuAD JSON");
}

static void test_tree(TestTally *t) {
    const char *text = "{\"label\": \"x\\ud800y\"}";
    cJSON *json = json_parse_strict(text, strlen(text), "config.json", "HuggingFace config");
    const cJSON *label = cJSON_GetObjectItemCaseSensitive(json, "label");
    CHECK(t, cJSON_IsString(label) && !strcmp(label->valuestring, "x\xEF\xBF\xBDy"),
          "the tree reader reads a lone surrogate as U+FFFD, as the record reader does");
    cJSON_Delete(json);
    char why[1200];
    ChildResult r = child_run(parse_nul, NULL);
    CHECK(t, child_refused(&r, "config.json: HuggingFace config: a \\u0000 escape (the NUL character) in a string at "
                               "line 2, column 14", why, sizeof why),
          "the tree reader refuses \\u0000 (its strings end at a NUL) naming line and column%s", why);
    r = child_run(parse_repeated, NULL);
    CHECK(t, child_refused(&r, "train.json: SQuAD JSON: key 'title' appears twice in the object of key 'data' (line 2, "
                               "column 2", why, sizeof why),
          "SQuAD: a repeated key in an object inside an array is named with its enclosing key and line%s", why);
}

static void test_whitespace(TestTally *t) {
    /* [c for c in range(0x110000) if chr(c).isspace()], Python 3.11 */
    static const uint32_t python[] = {0x9,    0xa,    0xb,    0xc,    0xd,    0x1c,   0x1d,   0x1e,   0x1f,   0x20,
                                      0x85,   0xa0,   0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                                      0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000};
    size_t k = 0, wrong = 0, count = sizeof python / sizeof *python;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        int want = k < count && python[k] == cp;
        k += want;
        wrong += corpus_round_is_space(cp) != want;
    }
    CHECK(t, wrong == 0, "corpus_round_is_space is Python's str.isspace() on every code point (%zu differ)", wrong);
    CHECK(t, corpus_round_is_blank("\xC2\xA0 \t\xE3\x80\x80\r", 8) && !corpus_round_is_blank("\xE2\x80\x8B", 3) && !corpus_round_is_blank("\xEF\xBB\xBF", 3) &&
              !corpus_round_is_blank("\xC2", 1),
          "a line of NBSP, space, tab, ideographic space is blank; ZWSP, a BOM, a broken byte are not");
}

static void test_round_lines(TestTally *t) {
    Round r = {0};
    const char *text = "a\nbb\n\nccc\r\ndd\ne";
    size_t used, n = corpus_round_split_units(&r, text, strlen(text), 3, &used);
    CHECK(t, n == 3 && used == 6 && r.units[2].len == 0, "a round of at most 3 lines stops after the third (%zu lines, %zu bytes)",
          n, used);
    n = corpus_round_split_units(&r, text + used, strlen(text) - used, 100, &used);
    CHECK(t, n == 3 && used == strlen(text) - 6 && r.units[0].len == 3 && r.units[2].len == 1,
          "the rest in the next round, CR of CRLF dropped, the last line without its newline (%zu lines)", n);
    corpus_round_free(&r);
}

/* --records: "1 HEX" (valid; HEX the bytes of string member "t", if any) or "0", a line a record. */
static int check_records(void) {
    size_t cap = 1 << 20, n = 0, got;
    char *in = xmalloc(cap);
    while ((got = fread(in + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap) {
            in = realloc(in, cap *= 2);
            RP_CHECK(in, "out of memory");
        }
    char *text = xmalloc(n + 1);
    for (size_t start = 0, i = 0; i <= n; i++) {
        if (i < n && in[i] != '\x01')
            continue;
        JsonMember m = {"t", 1, JSON_INVALID, 0, 0};
        JsonKind kind = json_check(in + start, i - start, &m, NULL, NULL);
        printf("%d", kind != JSON_INVALID);
        if (kind == JSON_OBJECT && m.kind == JSON_STRING) {
            size_t len = json_string_decode(in + start + m.at, m.len, text);
            printf(" ");
            for (size_t j = 0; j < len; j++)
                printf("%02x", (unsigned char)text[j]);
        }
        printf("\n");
        start = i + 1;
    }
    free(text);
    free(in);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--records"))
        return check_records();
    TestTally t = {0};
    test_grammar(&t);
    test_decode(&t);
    test_repeated_keys(&t);
    test_depth(&t);
    test_tree(&t);
    test_whitespace(&t);
    test_round_lines(&t);
    return tally_exit(&t);
}
