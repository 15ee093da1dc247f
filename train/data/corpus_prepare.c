/* Streaming corpus preparation (corpus_prepare.h): corpus files -> a shard set (shard_set.h), in
 * bounded memory.
 *
 * Each source file is read in rounds of data.read_chunk_mb (decompressed) bytes cut at a line
 * end; a round's lines are tokenized in parallel (corpus_round.h: the result does not depend on
 * the thread count) and then walked in order, here: lines
 * join the pending document, a document end sends it whole to the train or eval side of the
 * shard being filled, and a shard of data.shard_tokens tokens or more (or shard_tokens / 4
 * sentences + documents) is written at that document end. Memory: the round (bytes + ids +
 * per-line records: at most read_chunk_mb MiB and read_chunk_mb x 32768 lines), the shard, the
 * largest document. The format of each file is data.corpus_format's (auto: by the name), never
 * its content's; a UTF-8 byte order mark at its start is skipped.
 *
 * Held-out split: document D is held out iff u(D) < eval_fraction, u(D) = 53 high bits of
 * hash64(h(D) ^ a seed hash) / 2^53, h(D) = the chain h = hash64(h ^ hash_bytes(line)) over its
 * non-blank lines (CR of CRLF removed): a pure function of (seed, the document's text), whatever
 * the file, format, compression, position, process count or round size. */
#include "train/data/corpus_prepare.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/common.h"
#include "core/io/files.h"
#include "core/io/json.h"
#include "core/io/paths.h"
#include "core/rng.h"
#include "train/data/corpus_list.h"
#include "train/data/corpus_reader.h"
#include "train/data/corpus_round.h"
#include "train/data/md5.h"
#include "train/data/shard.h"
#include "train/data/shard_buffer.h"
#include "train/data/shard_parts.h"
#include "train/data/shard_settings.h"
#include "train/data/shard_temp.h"
#include "train/data/shard_write.h"
#include "train/data/tokenizer.h"

#define SPLIT_SALT 0x73706c6974ULL /* "split" */
#define BAD_NAMED 10               /* bad records named per source; the rest are counted */
#define MAX_LINE (1u << 30)        /* longest line (bytes) a round may grow to */
#define UNKNOWN_NAMED 10           /* sources named for their share of [UNK]; the rest are counted */
#define ROUND_BYTES_PER_LINE 32    /* a round holds at most read_chunk_mb MiB / this many lines */
#define SHARD_TOKENS_PER_ROW 4     /* a shard is written at shard_tokens / this many sentences + documents */

/* One source being prepared. */
typedef struct {
    const SetSettings *set;
    const Tokenizer *tok;
    const CorpusFile *src;
    char stem[18];
    int jsonl;
    uint64_t split_seed;
    ShardBuffer shard;
    ShardCounts *shards;
    int num_shards, cap_shards;
    int32_t *doc_tokens; /* the pending document */
    int64_t doc_num_tokens, doc_cap_tokens;
    int64_t *doc_lens;
    int64_t doc_num_sentences, doc_cap_sentences;
    uint64_t doc_hash;
    int64_t bad_named, bad_total, records; /* records: good JSON Lines records */
    int64_t unknown, tokens;               /* [UNK] and all tokens read from the source now */
    PrepareReport *report;
} Source;

static void flush_shard(Source *s, int64_t input_end, int64_t line_end) {
    double t0 = now_seconds();
    size_t cap = (size_t)s->cap_shards;
    s->shards = corpus_round_grow(s->shards, &cap, (size_t)s->num_shards + 1, sizeof *s->shards);
    RP_CHECK(s->shards, "out of memory");
    s->cap_shards = (int)cap;
    s->shards[s->num_shards] = shard_write(s->set, s->src, s->stem, s->num_shards, &s->shard,
                                           input_end, line_end);
    s->num_shards++;
    s->report->shards_written++;
    shard_buffer_clear(&s->shard);
    s->report->seconds_write += now_seconds() - t0;
}

static void add_sentence(Source *s, const int *ids, int64_t n) {
    if (n == 0) {
        s->shard.dropped_sentences++;
        return;
    }
    size_t cap_t = (size_t)s->doc_cap_tokens, cap_s = (size_t)s->doc_cap_sentences;
    s->doc_tokens = corpus_round_grow(s->doc_tokens, &cap_t, (size_t)(s->doc_num_tokens + n), sizeof(int32_t));
    s->doc_lens = corpus_round_grow(s->doc_lens, &cap_s, (size_t)s->doc_num_sentences + 1, sizeof(int64_t));
    RP_CHECK(s->doc_tokens && s->doc_lens, "%s: out of memory holding a document of %lld tokens",
             s->src->path, (long long)(s->doc_num_tokens + n));
    s->doc_cap_tokens = (int64_t)cap_t;
    s->doc_cap_sentences = (int64_t)cap_s;
    memcpy(s->doc_tokens + s->doc_num_tokens, ids, (size_t)n * sizeof(int32_t));
    s->tokens += n;
    s->doc_num_tokens += n;
    s->doc_lens[s->doc_num_sentences++] = n;
}

/* The pending document ends at input offset input_end (line line_end). */
static void end_document(Source *s, int64_t input_end, int64_t line_end) {
    if (s->doc_num_sentences > 0) {
        uint64_t u = hash64(s->doc_hash ^ s->split_seed);
        int eval = (double)(u >> 11) * 0x1p-53 < (double)s->set->data->eval_fraction;
        shard_buffer_add_document(&s->shard, eval, s->doc_tokens, s->doc_lens, s->doc_num_sentences);
        /* 4 bytes a token, 8 a sentence and 8 a document in memory: documents of a few tokens
         * (short lines) must not make a shard of shard_tokens 5x as large */
        const SplitBuffer *train = &s->shard.split[0], *held = &s->shard.split[1];
        int64_t rows = train->num_sentences + train->num_documents + held->num_sentences + held->num_documents;
        if (shard_buffer_tokens(&s->shard) >= s->set->data->shard_tokens ||
            rows >= s->set->data->shard_tokens / SHARD_TOKENS_PER_ROW + 1)
            flush_shard(s, input_end, line_end);
    }
    s->doc_num_tokens = s->doc_num_sentences = 0;
    s->doc_hash = 0;
}

static void bad_record(Source *s, UnitKind kind, int64_t line, const Unit *u) {
    s->shard.bad_records++;
    s->bad_total++;
    if (s->bad_named++ >= BAD_NAMED)
        return;
    const char *field = s->set->data->text_field;
    char why[CONFIG_PATH_MAX + 300];
    if (kind == UNIT_BAD_JSON) {
        JsonError e;
        json_check(u->text, u->len, NULL, NULL, &e);
        if (e.kind == JSON_ERROR_TRAILING)
            snprintf(why, sizeof why, "a second JSON value at column %zu, after the first record (two records on one "
                     "line, as `cat` makes of a file without its final newline? each needs its own line)", e.at + 1);
        else
            snprintf(why, sizeof why, "not valid JSON: %s at column %zu", e.message, e.at + 1);
    } else if (kind == UNIT_NOT_OBJECT) {
        snprintf(why, sizeof why, "not a JSON object");
    } else {
        snprintf(why, sizeof why, "%s '%s'%s", kind == UNIT_NO_FIELD ? "no member" : "member", field,
                 kind == UNIT_NO_FIELD ? " (data.text_field)" : " is not a string");
    }
    fprintf(stderr, "realpos: warning: %s:%lld: bad record: %s; skipped\n", s->src->path, (long long)line, why);
}

/* Walk a tokenized round in order. base: input offset of the round's first byte; line_base:
 * lines before it. */
static void walk_round(Source *s, const Round *r, size_t num_units, int64_t base, int64_t line_base) {
    size_t id_pos = 0, len_pos = 0;
    for (size_t i = 0; i < num_units; i++) {
        const Block *b = &r->blocks[i / ROUND_UNIT_BLOCK];
        if (i % ROUND_UNIT_BLOCK == 0)
            id_pos = len_pos = 0;
        int64_t line = line_base + (int64_t)i + 1, end = base + (int64_t)r->units[i].end;
        switch ((UnitKind)r->kind[i]) {
        case UNIT_BLANK:
            if (!s->jsonl)
                end_document(s, end, line);
            break;
        case UNIT_SENTENCE:
        case UNIT_RECORD: /* a record is a whole document: its hash chains its lines already */
            s->doc_hash = r->kind[i] == UNIT_RECORD ? r->hash[i] : hash64(s->doc_hash ^ r->hash[i]);
            for (int32_t k = 0; k < r->num_sentences[i]; k++) {
                add_sentence(s, b->ids + id_pos, b->lens[len_pos]);
                id_pos += (size_t)b->lens[len_pos++];
            }
            if (r->kind[i] == UNIT_RECORD) {
                s->shard.dropped_sentences += r->num_sentences[i] == 0; /* an empty or blank text */
                end_document(s, end, line);
            }
            break;
        default:
            bad_record(s, (UnitKind)r->kind[i], line, &r->units[i]);
        }
        s->records += r->kind[i] == UNIT_RECORD;
        s->unknown += i % ROUND_UNIT_BLOCK == 0 ? b->unknown : 0;
    }
}

static size_t fill(CorpusReader *in, char *buf, size_t have, size_t cap, int *eof, double *seconds) {
    double t0 = now_seconds();
    while (!*eof && have < cap) {
        size_t got = corpus_reader_read(in, buf + have, cap - have);
        *eof = got == 0;
        have += got;
    }
    *seconds += now_seconds() - t0;
    return have;
}

/* auto, a file named as text: refused if its first non-blank line is a JSON object (JSON Lines
 * without the name; read as text it would train on the JSON syntax). Never a switch of format. */
static void refuse_unnamed_jsonl(const char *path, const char *buf, size_t n) {
    for (size_t start = 0; start < n;) {
        const char *nl = memchr(buf + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - buf) : n;
        if (!corpus_round_is_blank(buf + start, end - start)) {
            RP_CHECK(!nl || json_check(buf + start, end - start, NULL, NULL, NULL) != JSON_OBJECT,
                     "%s: its first line is a JSON object, but data.corpus_format = auto reads it as text (its name "
                     "does not end in .jsonl, .json or .ndjson): rename it, or set data.corpus_format = jsonl (or "
                     "text, to train on the JSON as text)", path);
            return;
        }
        start = end + 1;
    }
}

/* Prepare one source: keep its intact shards, read on from where they end, write the rest and
 * the manifest. */
static void prepare_source(Source *s, Round *r) {
    const DataConfig *d = s->set->data;
    int64_t skip = 0, line_base = 0, input_end, line_end;
    ShardCounts kept;
    while (shard_write_kept(s->set, s->src, s->stem, s->num_shards, &kept, &input_end, &line_end)) {
        size_t cap = (size_t)s->cap_shards;
        s->shards = corpus_round_grow(s->shards, &cap, (size_t)s->num_shards + 1, sizeof *s->shards);
        RP_CHECK(s->shards, "out of memory");
        s->cap_shards = (int)cap;
        s->shards[s->num_shards++] = kept;
        s->report->shards_kept++;
        skip = input_end;
        line_base = line_end;
    }
    int kept_shards = s->num_shards;
    if (s->num_shards)
        rp_log("prepare: %s: %d shard%s kept, reading on from byte %lld (line %lld)", s->src->path,
               s->num_shards, s->num_shards == 1 ? "" : "s", (long long)skip, (long long)line_base);
    CorpusReader *in = corpus_reader_open(s->src->path);
    size_t cap = (size_t)d->read_chunk_mb << 20, have = 0, max_units = cap / ROUND_BYTES_PER_LINE;
    char *buf = xmalloc(cap);
    int eof = 0;
    int64_t offset = 0;
    have = fill(in, buf, have, cap, &eof, &s->report->seconds_read);
    const char *nl = memchr(buf, '\n', have);
    RP_CHECK(nl || !memchr(buf, '\r', have),
             "%s: lines end in CR alone (classic Mac OS line endings): realpos reads LF or CRLF line "
             "ends; convert the file with: tr '\\r' '\\n' < FILE > NEW", s->src->path);
    s->jsonl = corpus_reader_is_jsonl(d, s->src->path);
    size_t bom = have >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3) ? 3 : 0; /* a UTF-8 byte order mark: not text */
    if (!s->jsonl && d->corpus_format == CORPUS_AUTO)
        refuse_unnamed_jsonl(s->src->path, buf + bom, have - bom);
    while (offset < skip) { /* the kept shards' input, read and dropped */
        size_t drop = (size_t)(skip - offset) < have ? (size_t)(skip - offset) : have;
        RP_CHECK(drop > 0, "%s: shorter than its kept shards say (%lld bytes): the file changed",
                 s->src->path, (long long)skip);
        memmove(buf, buf + drop, have - drop);
        have -= drop;
        offset += (int64_t)drop;
        have = fill(in, buf, have, cap, &eof, &s->report->seconds_read);
    }
    for (;;) {
        const char *last = have ? memrchr(buf, '\n', have) : NULL;
        size_t cut = eof ? have : last ? (size_t)(last - buf) + 1 : 0;
        if (!cut && !eof) { /* one line longer than the round: grow it */
            RP_CHECK(cap < MAX_LINE, "%s: line %lld is longer than %u bytes", s->src->path,
                     (long long)line_base + 1, MAX_LINE);
            cap *= 2;
            buf = realloc(buf, cap);
            RP_CHECK(buf, "%s: out of memory reading a line of %zu bytes", s->src->path, cap);
            have = fill(in, buf, have, cap, &eof, &s->report->seconds_read);
            continue;
        }
        size_t units = corpus_round_split_units(r, buf, cut, max_units, &cut);
        if (offset == 0 && bom && units)
            r->units[0].text += bom, r->units[0].len -= bom;
        double t0 = now_seconds();
        corpus_round_tokenize(r, units, s->tok, s->jsonl, d->text_field);
        s->report->seconds_tokenize += now_seconds() - t0;
        walk_round(s, r, units, offset, line_base);
        s->report->bytes += (int64_t)cut;
        line_base += (int64_t)units;
        memmove(buf, buf + cut, have - cut);
        have -= cut;
        offset += (int64_t)cut;
        if (eof && !have)
            break;
        have = fill(in, buf, have, cap, &eof, &s->report->seconds_read);
    }
    end_document(s, offset, line_base);
    if (s->shard.split[0].num_documents + s->shard.split[1].num_documents > 0 ||
        s->shard.bad_records || s->shard.dropped_sentences)
        flush_shard(s, offset, line_base);
    if (s->bad_named > BAD_NAMED)
        fprintf(stderr, "realpos: warning: %s: %lld more bad records (%lld in all)\n", s->src->path,
                (long long)(s->bad_named - BAD_NAMED), (long long)s->bad_total);
    RP_CHECK(!s->jsonl || s->records || !s->bad_total || kept_shards,
             "%s: read as JSON Lines (%s), but none of its %lld records is a JSON object with a string member "
             "'%s': %s", s->src->path, d->corpus_format == CORPUS_JSONL ? "data.corpus_format = jsonl" : "by its name",
             (long long)s->bad_total, d->text_field,
             d->corpus_format == CORPUS_JSONL ? "is it text? set data.corpus_format = auto or text"
                                              : "is it text? rename it, or set data.corpus_format = text");
    if (s->tokens > 0 && (double)s->unknown > TOKENIZER_UNKNOWN_WARN * (double)s->tokens &&
        s->report->unknown_sources++ < UNKNOWN_NAMED)
        tokenizer_report_unknown(s->unknown, s->tokens, s->src->path, d->vocab);
    s->report->unknown_tokens += s->unknown;
    shard_write_manifest(s->set, s->src, s->stem, corpus_reader_compression(in), s->jsonl ? "jsonl" : "text",
                   s->shards, s->num_shards);
    corpus_reader_close(in);
    free(buf);
}

PrepareReport corpus_prepare(const DataConfig *data, int part, int num_parts) {
    PrepareReport report = {0};
    double t0 = now_seconds();
    RP_CHECK(data->num_corpus > 0, "[data] corpus: expected at least one corpus file, got none");
    RP_CHECK(data->vocab[0], "[data] vocab: expected a vocabulary file, got none");
    RP_CHECK(num_parts >= 1 && part >= 0 && part < num_parts,
             "prepare --part: expected I/N with 0 <= I < N, got %d/%d", part, num_parts);
    CorpusList list = corpus_list_expand(data);
    char index[CONFIG_PATH_MAX + 32];
    snprintf(index, sizeof index, "%s/%s", data->shard_dir, SHARD_SET_INDEX);
    struct stat dir_st;
    int have_dir = stat(data->shard_dir, &dir_st) == 0;
    for (int i = 0; i < list.count; i++) { /* never write over a file prepare reads */
        require_distinct_files(list.files[i].path, "prepare: [data] corpus", index,
                               "the shard set index ([data] shard_dir)");
        char dir[CONFIG_PATH_MAX];
        struct stat st;
        path_directory(dir, sizeof dir, list.files[i].path);
        RP_CHECK(!have_dir || stat(dir, &st) != 0 || st.st_dev != dir_st.st_dev ||
                     st.st_ino != dir_st.st_ino,
                 "%s: corpus file inside [data] shard_dir %s, where prepare writes its shards: move "
                 "it out", list.files[i].path, data->shard_dir);
    }
    size_t vocab_len;
    char *vocab_text = read_file(data->vocab, &vocab_len, "vocabulary ([data] vocab)");
    Tokenizer *tok = tokenizer_from_text(vocab_text, vocab_len, data->do_lower_case, data->vocab);
    char vocab_md5[33];
    md5_hex(vocab_text, vocab_len, vocab_md5);
    SetSettings set;
    shard_settings_init(&set, data, vocab_md5, tokenizer_vocab_size(tok));
    mkdir_p(data->shard_dir);
    int recorded = shard_parts_claim(&set, num_parts);
    for (int i = 0; i < list.count && recorded != num_parts; i++) { /* harmless only with nothing left */
        char stem[18];
        ShardCounts ignored = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
        shard_settings_source_stem(stem, &set, list.files[i].path);
        if (!shard_write_manifest_done(&set, &list.files[i], stem, 0, &ignored))
            shard_parts_refuse(data->shard_dir, recorded, num_parts);
    }
    shard_temp_remove_stale(data->shard_dir, num_parts == 1);
    Round round = {0};
    int index_dropped = 0;
    report.sources = list.count;
    for (int i = 0; i < list.count; i++) {
        Source s = {.set = &set, .tok = tok, .src = &list.files[i], .report = &report};
        shard_settings_source_stem(s.stem, &set, s.src->path);
        ShardCounts total = {{0, 0, 0}, {0, 0, 0}, 0, 0, 0};
        if (i % num_parts != part)
            continue;
        if (!shard_write_manifest_done(&set, s.src, s.stem, 1, &total)) {
            if (!index_dropped++)
                shard_parts_drop_index(data->shard_dir);
            s.split_seed = hash64((uint64_t)data->seed ^ SPLIT_SALT);
            shard_buffer_init(&s.shard, set.vocab_size);
            prepare_source(&s, &round);
            shard_buffer_free(&s.shard);
            free(s.shards), free(s.doc_tokens), free(s.doc_lens);
            RP_CHECK(shard_write_manifest_done(&set, s.src, s.stem, 0, &total), "%s: manifest not readable back",
                     s.src->path);
        } else {
            report.sources_kept++;
        }
        report.train.documents += total.train.documents;
        report.train.sentences += total.train.sentences;
        report.train.tokens += total.train.tokens;
        report.eval.documents += total.eval.documents;
        report.eval.sentences += total.eval.sentences;
        report.eval.tokens += total.eval.tokens;
        report.bad_records += total.bad_records;
        report.dropped_sentences += total.dropped_sentences;
    }
    if (report.unknown_sources > UNKNOWN_NAMED)
        rp_log("warning: %d more corpus files (%d in all) are over %.0f%% [UNK] with vocabulary %s",
               report.unknown_sources - UNKNOWN_NAMED, report.unknown_sources, 100 * TOKENIZER_UNKNOWN_WARN, data->vocab);
    report.index_written = shard_parts_finish(&set, &list);
    memcpy(report.prepare_id, set.prepare_id, sizeof report.prepare_id);
    corpus_round_free(&round);
    corpus_list_free(&list);
    tokenizer_free(tok);
    free(vocab_text);
    report.seconds_total = now_seconds() - t0;
    return report;
}
