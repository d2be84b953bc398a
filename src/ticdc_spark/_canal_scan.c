/*
 * _canal_scan: Canal-JSON row messages straight into the changelog's Arrow buffers.
 *
 * Why a scanner of our own: the Spark decode stage spends its time building a Python dict and
 * str objects for every message (orjson.loads) and converting them back into Arrow.  No
 * library fits: pyarrow.json.read_json was measured slower than orjson on these messages
 * (0.6 s against 0.29 s for 200k messages on one core), turns objects into structs (losing
 * the difference between an absent key and a null value that Canal's `old` depends on) and
 * cannot make maps; simdjson's Python binding still makes a Python object per value.
 *
 * The scanner handles one shape only, the common one: a DML message (INSERT, UPDATE, DELETE)
 * with exactly one row in `data` and, for an UPDATE, one row in `old` with the same columns in
 * the same order.  Anything else, and anything it does not fully understand (escaped
 * top-level keys, a value that is not a string or null, a claim-check reference, exponents,
 * a malformed document), marks the message "slow": the Python decoder, with every check,
 * decodes it.  Marking slow is always safe; the scanner only has to be right about the
 * messages it keeps, which the tests check against the Python decoder.
 *
 * Memory: nothing is allocated from a length read in a message; output buffers grow with the
 * bytes actually consumed, and nesting is limited to MAX_DEPTH.
 *
 * scan(data, offsets) -> ScanResult (a struct sequence of bytearrays, two of them ScanImage;
 * SCAN_FIELDS and IMAGE_FIELDS name and describe each), where `data` and `offsets` are the
 * buffers of an Arrow binary array (int32 offsets, n + 1 of them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define MAX_DEPTH 64

/* ---- growable byte buffers --------------------------------------------------------------- */

/* A buffer backed by a bytearray, so that the result hands it to Python (and Arrow) with no
   copy. */
typedef struct {
    PyObject *obj;
    char *p;
    Py_ssize_t len, cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t extra) {
    Py_ssize_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    if (!b->obj) {
        b->obj = PyByteArray_FromStringAndSize(NULL, cap);
        if (!b->obj) return -1;
    } else if (PyByteArray_Resize(b->obj, cap) < 0) {
        return -1;
    }
    b->p = PyByteArray_AS_STRING(b->obj);
    b->cap = cap;
    return 0;
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra) {
    return b->len + extra <= b->cap ? 0 : buf_grow(b, extra);
}

static inline int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (buf_reserve(b, n) < 0) return -1;
    memcpy(b->p + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}

static inline int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, sizeof v); }

/* The buffer's bytearray, cut to its length (the Buf lets go of it). */
static PyObject *buf_take(Buf *b) {
    PyObject *obj = b->obj;
    if (!obj) return PyByteArray_FromStringAndSize(NULL, 0);
    if (PyByteArray_Resize(obj, b->len) < 0) return NULL;
    b->obj = NULL;
    return obj;
}

static void buf_free(Buf *b) { Py_CLEAR(b->obj); }

/* A column of strings: Arrow offsets (int32), bytes, and validity (one byte per entry). */
typedef struct {
    Buf bytes, offsets, valid;
    Py_ssize_t count;
} Strings;

/* Where a Strings column stood, to return to it. */
typedef struct {
    Py_ssize_t bytes, offsets, valid, count;
} Mark;

static int strings_init(Strings *s) {
    memset(s, 0, sizeof *s);
    return buf_i32(&s->offsets, 0);
}

static Mark strings_mark(const Strings *s) {
    Mark m = {s->bytes.len, s->offsets.len, s->valid.len, s->count};
    return m;
}

static void strings_rewind(Strings *s, Mark m) {
    s->bytes.len = m.bytes;
    s->offsets.len = m.offsets;
    s->valid.len = m.valid;
    s->count = m.count;
}

/* Ends the entry whose bytes were just written. */
static inline int strings_close(Strings *s, char valid) {
    if (s->bytes.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a string column of a batch passed 2 GiB");
        return -1;
    }
    if (buf_reserve(&s->valid, 1) < 0 || buf_reserve(&s->offsets, 4) < 0) return -1;
    s->valid.p[s->valid.len++] = valid;
    int32_t end = (int32_t)s->bytes.len;
    memcpy(s->offsets.p + s->offsets.len, &end, 4);
    s->offsets.len += 4;
    s->count++;
    return 0;
}

/* Appends src's entries after `from` to dst. */
static int strings_copy(Strings *dst, const Strings *src, Mark from) {
    const int32_t *offs = (const int32_t *)(src->offsets.p + from.offsets) - 1;
    Py_ssize_t entries = src->count - from.count;
    if (buf_reserve(&dst->bytes, src->bytes.len - from.bytes) < 0) return -1;
    memcpy(dst->bytes.p + dst->bytes.len, src->bytes.p + from.bytes,
           (size_t)(src->bytes.len - from.bytes));
    int64_t shift = (int64_t)dst->bytes.len - from.bytes;
    dst->bytes.len += src->bytes.len - from.bytes;
    for (Py_ssize_t i = 1; i <= entries; i++) {
        int32_t raw;
        memcpy(&raw, offs + i, 4);
        int64_t end = raw + shift;
        if (end > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "a string column of a batch passed 2 GiB");
            return -1;
        }
        if (buf_reserve(&dst->valid, 1) < 0 || buf_i32(&dst->offsets, (int32_t)end) < 0)
            return -1;
        dst->valid.p[dst->valid.len++] = src->valid.p[from.valid + i - 1];
        dst->count++;
    }
    return 0;
}

static void strings_free(Strings *s) {
    buf_free(&s->bytes);
    buf_free(&s->offsets);
    buf_free(&s->valid);
}

/* A row image column: keys and values. */
typedef struct {
    Strings keys, values;
} Image;

typedef struct {
    Mark keys, values;
} ImageMark;

static ImageMark image_mark(const Image *im) {
    ImageMark m = {strings_mark(&im->keys), strings_mark(&im->values)};
    return m;
}

static void image_rewind(Image *im, ImageMark m) {
    strings_rewind(&im->keys, m.keys);
    strings_rewind(&im->values, m.values);
}

/* ---- the scanner --------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *p, *end;
} Scan;

enum { OK = 0, SLOW = 1, FAIL = -1 }; /* FAIL: a Python exception is set (out of memory) */

static void skip_ws(Scan *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
}

static int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static int read_hex4(Scan *s, uint32_t *out) {
    if (s->end - s->p < 4) return SLOW;
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(s->p[i]);
        if (h < 0) return SLOW;
        v = (v << 4) | (uint32_t)h;
    }
    s->p += 4;
    *out = v;
    return OK;
}

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates), or 0. */
static int utf8_length(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0; /* overlong */
        if (c == 0xED && p[1] > 0x9F) return 0; /* surrogate */
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 ||
            (p[3] & 0xC0) != 0x80)
            return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] > 0x8F) return 0; /* past U+10FFFF */
        return 4;
    }
    return 0;
}

/* Bytes a JSON string holds as they are: printable ASCII but the quote and the backslash. */
static unsigned char PLAIN[256];

/* Whether any of eight bytes is not plain: under 0x20, a quote, a backslash, or over 0x7F
   (exact, with the "has a zero byte" bit trick). */
static inline int has_special(uint64_t v) {
    const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
    uint64_t quote = v ^ (ones * '"'), backslash = v ^ (ones * '\\');
    uint64_t control = (v - ones * 0x20) & ~v;
    uint64_t is_quote = (quote - ones) & ~quote, is_backslash = (backslash - ones) & ~backslash;
    return ((control | is_quote | is_backslash | v) & high) != 0;
}

/* A JSON string at s->p (the opening quote), unescaped into out (NULL: only checked).
   *escaped tells whether it held escapes.  Unescaped text is never longer than its JSON, so
   reserving the rest of the message once bounds every write (by bytes actually present). */
static int read_string(Scan *s, Buf *out, int *escaped) {
    if (s->p >= s->end || *s->p != '"') return SLOW;
    s->p++;
    if (escaped) *escaped = 0;
    char *dst = NULL;
    if (out) {
        if (buf_reserve(out, s->end - s->p) < 0) return FAIL;
        dst = out->p + out->len;
    }
    for (;;) {
        int at_special = 0;
#ifdef __SSE2__
        /* sixteen bytes at a time (every x86-64 has SSE2): a whole block is copied, then the
           output moves on by its plain bytes only (the reserve covers the rest of the
           message, so the block's tail is room already ours); a block with a special byte
           leaves s->p on it (inside the message), and the slower loops are skipped */
        const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
        const __m128i below = _mm_set1_epi8(0x1F);
        while (s->end - s->p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)s->p);
            __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash));
            hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_max_epu8(x, below), below));
            unsigned mask = (unsigned)(_mm_movemask_epi8(hit) | _mm_movemask_epi8(x));
            int plain = mask ? __builtin_ctz(mask) : 16;
            if (dst) {
                _mm_storeu_si128((__m128i *)dst, x);
                dst += plain;
            }
            s->p += plain;
            if (mask) {
                at_special = 1;
                break;
            }
        }
#endif
        if (!at_special) {
            /* eight plain bytes at a time, then byte by byte up to the next special one */
            while (s->end - s->p >= 8) {
                uint64_t v;
                memcpy(&v, s->p, 8);
                if (has_special(v)) break;
                if (dst) {
                    memcpy(dst, &v, 8);
                    dst += 8;
                }
                s->p += 8;
            }
            if (dst) {
                while (s->p < s->end && PLAIN[*s->p]) *dst++ = (char)*s->p++;
            } else {
                while (s->p < s->end && PLAIN[*s->p]) s->p++;
            }
            if (s->p >= s->end) return SLOW;
        }
        unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            if (out) out->len = dst - out->p;
            return OK;
        }
        if (c < 0x20) return SLOW;
        if (c >= 0x80) {
            int n = utf8_length(s->p, s->end);
            if (!n) return SLOW;
            if (dst) {
                memcpy(dst, s->p, (size_t)n);
                dst += n;
            }
            s->p += n;
            continue;
        }
        /* a backslash escape */
        if (escaped) *escaped = 1;
        if (s->end - s->p < 2) return SLOW;
        unsigned char e = s->p[1];
        s->p += 2;
        char one;
        switch (e) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            uint32_t cp, low;
            if (read_hex4(s, &cp) != OK) return SLOW;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return SLOW; /* a lone low surrogate */
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u') return SLOW;
                s->p += 2;
                if (read_hex4(s, &low) != OK || low < 0xDC00 || low > 0xDFFF) return SLOW;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            if (!dst) continue;
            if (cp < 0x80) {
                *dst++ = (char)cp;
            } else if (cp < 0x800) {
                *dst++ = (char)(0xC0 | (cp >> 6));
                *dst++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *dst++ = (char)(0xE0 | (cp >> 12));
                *dst++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *dst++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *dst++ = (char)(0xF0 | (cp >> 18));
                *dst++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *dst++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *dst++ = (char)(0x80 | (cp & 0x3F));
            }
            continue;
        }
        default:
            return SLOW;
        }
        if (dst) *dst++ = one;
    }
}

/* A JSON number; an integer of at most 19 digits is stored in *value (when wanted) and
   *integer set.  Exponents and very long numbers are SLOW (orjson may refuse them). */
static int read_number(Scan *s, int *integer, int64_t *value) {
    int negative = 0, digits = 0;
    uint64_t v = 0;
    if (s->p < s->end && *s->p == '-') {
        negative = 1;
        s->p++;
    }
    if (s->p >= s->end || *s->p < '0' || *s->p > '9') return SLOW;
    if (*s->p == '0' && s->end - s->p > 1 && s->p[1] >= '0' && s->p[1] <= '9') return SLOW;
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') {
        if (++digits > 100) return SLOW;
        if (digits <= 19) v = v * 10 + (uint64_t)(*s->p - '0');
        s->p++;
    }
    *integer = digits <= 19 && !negative && v <= (uint64_t)INT64_MAX;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        *integer = 0;
        if (s->p >= s->end || *s->p < '0' || *s->p > '9') return SLOW;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) return SLOW;
    if (*integer && value) *value = (int64_t)v;
    return OK;
}

static int read_literal(Scan *s, const char *word) {
    size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0) return SLOW;
    s->p += n;
    return OK;
}

enum { MORE = 2 }; /* after_item: another member or element follows */

/* After a member or element: MORE (the comma consumed), or OK at `close` (consumed). */
static int after_item(Scan *s, unsigned char close) {
    skip_ws(s);
    if (s->p >= s->end) return SLOW;
    if (*s->p == ',') {
        s->p++;
        return MORE;
    }
    if (*s->p != close) return SLOW;
    s->p++;
    return OK;
}

/* A member's key (its raw text in [*start, *end), unescaped into out unless NULL) and the
   colon after it. */
static int read_key(Scan *s, Buf *out, int *escaped, const unsigned char **start,
                    const unsigned char **end) {
    int r;
    skip_ws(s);
    *start = s->p;
    if ((r = read_string(s, out, escaped)) != OK) return r;
    *end = s->p;
    skip_ws(s);
    if (s->p >= s->end || *s->p != ':') return SLOW;
    s->p++;
    skip_ws(s);
    return OK;
}

/* Checks and skips any JSON value. */
static int skip_value(Scan *s, int depth) {
    skip_ws(s);
    if (s->p >= s->end) return SLOW;
    unsigned char c = *s->p;
    if (c == '"') return read_string(s, NULL, NULL);
    if (c == 't') return read_literal(s, "true");
    if (c == 'f') return read_literal(s, "false");
    if (c == 'n') return read_literal(s, "null");
    if (c == '-' || (c >= '0' && c <= '9')) {
        int integer;
        return read_number(s, &integer, NULL);
    }
    if (c != '{' && c != '[') return SLOW;
    if (depth >= MAX_DEPTH) return SLOW;
    unsigned char close = c == '{' ? '}' : ']';
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return OK;
    }
    for (;;) {
        int r;
        const unsigned char *start, *end;
        if (c == '{' && (r = read_key(s, NULL, NULL, &start, &end)) != OK) return r;
        if ((r = skip_value(s, depth + 1)) != OK) return r;
        if ((r = after_item(s, close)) != MORE) return r;
    }
}

/* Validated top-level containers of earlier messages in the batch (`mysqlType`, `sqlType`,
   `pkNames`: a table's messages repeat them byte for byte).  A value whose bytes equal one of
   them is that same complete JSON value (objects and arrays end at their own closing bracket,
   so identical bytes parse identically), and is skipped with one memcmp instead of being
   scanned.  The spans point into the batch's data buffer, which outlives the scan. */
#define MEMO_SLOTS 4

typedef struct {
    const unsigned char *start[MEMO_SLOTS];
    Py_ssize_t len[MEMO_SLOTS];
    int next;
} Memo;

/* Checks and skips a member's value at the top level of a message, through the memo. */
static int skip_member(Scan *s, Memo *memo) {
    skip_ws(s);
    if (s->p >= s->end || (*s->p != '{' && *s->p != '[')) return skip_value(s, 1);
    Py_ssize_t left = s->end - s->p;
    for (int i = 0; i < MEMO_SLOTS; i++) {
        Py_ssize_t n = memo->len[i];
        if (n && n <= left && memo->start[i][0] == *s->p && !memcmp(memo->start[i], s->p, (size_t)n)) {
            s->p += n;
            return OK;
        }
    }
    const unsigned char *start = s->p;
    int r = skip_value(s, 1);
    if (r == OK) {
        memo->start[memo->next] = start;
        memo->len[memo->next] = s->p - start;
        memo->next = (memo->next + 1) % MEMO_SLOTS;
    }
    return r;
}

/* A row object into `image` (keys and string-or-null values); `raw_keys` gets each key's raw
   JSON text followed by a comma (the table's shape).  A value of another type is SLOW. */
static int read_image(Scan *s, Image *image, Buf *raw_keys) {
    int r;
    skip_ws(s);
    if (s->p >= s->end || *s->p != '{') return SLOW;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') return SLOW; /* a row without columns */
    for (;;) {
        const unsigned char *start, *end;
        if ((r = read_key(s, &image->keys.bytes, NULL, &start, &end)) != OK) return r;
        if (strings_close(&image->keys, 1) < 0) return FAIL;
        if (raw_keys && (buf_put(raw_keys, start, end - start) < 0 || buf_put(raw_keys, ",", 1) < 0))
            return FAIL;
        if (s->p < s->end && *s->p == '"') {
            if ((r = read_string(s, &image->values.bytes, NULL)) != OK) return r;
            if (strings_close(&image->values, 1) < 0) return FAIL;
        } else if (read_literal(s, "null") == OK) {
            if (strings_close(&image->values, 0) < 0) return FAIL;
        } else {
            return SLOW;
        }
        if ((r = after_item(s, '}')) != MORE) return r;
    }
}

/* `[ {row} ]`: an array of exactly one row object. */
static int read_one_row(Scan *s, Image *image, Buf *raw_keys) {
    int r;
    skip_ws(s);
    if (s->p >= s->end || *s->p != '[') return SLOW;
    s->p++;
    if ((r = read_image(s, image, raw_keys)) != OK) return r;
    skip_ws(s);
    if (s->p >= s->end || *s->p != ']') return SLOW;
    s->p++;
    return OK;
}

typedef struct {
    const unsigned char *start, *end;
} Span;

/* The member value at s->p, checked, and its raw text. */
static int raw_value(Scan *s, Span *span, Memo *memo) {
    skip_ws(s);
    span->start = s->p;
    int r = skip_member(s, memo);
    span->end = s->p;
    return r;
}

enum { OP_INSERT = 1, OP_UPDATE = 2, OP_DELETE = 3 };

/* The batch's outputs: one entry per message in each column, and the image entries.  Shapes
   are numbered: `shape_ids` holds each message's number (-1: slow), `shape` the text of each
   number; a message of the same shape as the previous fast one reuses its number. */
typedef struct {
    Buf status, op, key_only, commit_ts, before_rows, after_rows, before_null, after_null;
    Buf shape_ids, last_keys;
    Strings database, table, shape;
    Image before, after;
    Span last_database, last_table, last_mysql_type, last_pk_names;
    Memo memo;
} Batch;

/* What one message holds, while it is being read.  Its `data` row is written straight into
   the batch's after-image column and its `old` row into the before-image column, from the
   marks on; the end of the message moves or drops them as its type says. */
typedef struct {
    int op, key_only, has_commit_ts, has_es, has_old;
    int64_t commit_ts, es;
    Span database, table, mysql_type, pk_names;
    Buf raw_keys;
    ImageMark before, after;
    Mark database_mark, table_mark;
} Message;

enum {
    F_DATABASE = 1, F_TABLE = 2, F_TYPE = 4, F_ISDDL = 8, F_DATA = 16, F_OLD = 32,
    F_MYSQLTYPE = 64, F_PKNAMES = 128, F_TIDB = 256, F_ES = 512,
};
#define F_REQUIRED (F_DATABASE | F_TABLE | F_TYPE | F_ISDDL | F_DATA | F_MYSQLTYPE | F_PKNAMES)

static int key_is(const unsigned char *start, const unsigned char *end, const char *name) {
    size_t n = strlen(name);
    return (size_t)(end - start) == n + 2 && memcmp(start + 1, name, n) == 0;
}

static int read_tidb(Scan *s, Message *m) {
    int r, escaped;
    skip_ws(s);
    if (read_literal(s, "null") == OK) return OK;
    if (s->p >= s->end || *s->p != '{') return SLOW;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return OK;
    }
    for (;;) {
        const unsigned char *start, *end;
        if ((r = read_key(s, NULL, &escaped, &start, &end)) != OK) return r;
        if (escaped) return SLOW;
        if (key_is(start, end, "commitTs")) {
            if (m->has_commit_ts) return SLOW; /* twice */
            if (read_literal(s, "null") == OK) {
                m->has_commit_ts = 0;
            } else {
                int integer;
                if ((r = read_number(s, &integer, &m->commit_ts)) != OK) return r;
                if (!integer) return SLOW;
                m->has_commit_ts = 1;
            }
        } else if (key_is(start, end, "onlyHandleKey")) {
            m->key_only = read_literal(s, "true") == OK;
            if (!m->key_only && (r = skip_value(s, 2)) != OK) return r;
        } else if (key_is(start, end, "claimCheckLocation")) {
            return SLOW;
        } else if ((r = skip_value(s, 2)) != OK) {
            return r;
        }
        if ((r = after_item(s, '}')) != MORE) return r;
    }
}

/* Whether the keys written after two marks are the same, in the same order. */
static int same_keys(const Strings *a, Mark ma, const Strings *b, Mark mb) {
    Py_ssize_t count = a->count - ma.count, bytes = a->bytes.len - ma.bytes;
    if (count != b->count - mb.count || bytes != b->bytes.len - mb.bytes) return 0;
    if (memcmp(a->bytes.p + ma.bytes, b->bytes.p + mb.bytes, (size_t)bytes)) return 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int32_t x, y, x0, y0;
        memcpy(&x0, a->offsets.p + ma.offsets - 4, 4);
        memcpy(&y0, b->offsets.p + mb.offsets - 4, 4);
        memcpy(&x, a->offsets.p + ma.offsets + 4 * i, 4);
        memcpy(&y, b->offsets.p + mb.offsets + 4 * i, 4);
        if (x - x0 != y - y0) return 0;
    }
    return 1;
}

static int read_message(Scan *s, Message *m, Batch *b) {
    int r, escaped, seen = 0;
    skip_ws(s);
    if (s->p >= s->end || *s->p != '{') return SLOW;
    s->p++;
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') return SLOW;
    for (;;) {
        const unsigned char *start, *end;
        if ((r = read_key(s, NULL, &escaped, &start, &end)) != OK) return r;
        if (escaped) return SLOW; /* "\u0064ata" would be "data" */
        int field = 0;
        if (key_is(start, end, "database")) {
            field = F_DATABASE;
            m->database.start = s->p;
            r = read_string(s, &b->database.bytes, NULL);
            m->database.end = s->p;
        } else if (key_is(start, end, "table")) {
            field = F_TABLE;
            m->table.start = s->p;
            r = read_string(s, &b->table.bytes, NULL);
            m->table.end = s->p;
        } else if (key_is(start, end, "type")) {
            field = F_TYPE;
            if (read_literal(s, "\"INSERT\"") == OK) m->op = OP_INSERT;
            else if (read_literal(s, "\"UPDATE\"") == OK) m->op = OP_UPDATE;
            else if (read_literal(s, "\"DELETE\"") == OK) m->op = OP_DELETE;
            else r = SLOW;
        } else if (key_is(start, end, "isDdl")) {
            field = F_ISDDL;
            r = read_literal(s, "false");
        } else if (key_is(start, end, "data")) {
            field = F_DATA;
            r = read_one_row(s, &b->after, &m->raw_keys);
        } else if (key_is(start, end, "old")) {
            field = F_OLD;
            if (read_literal(s, "null") == OK) {
                r = OK;
            } else {
                m->has_old = 1;
                r = read_one_row(s, &b->before, NULL);
            }
        } else if (key_is(start, end, "mysqlType")) {
            field = F_MYSQLTYPE;
            r = raw_value(s, &m->mysql_type, &b->memo);
        } else if (key_is(start, end, "pkNames")) {
            field = F_PKNAMES;
            r = raw_value(s, &m->pk_names, &b->memo);
        } else if (key_is(start, end, "_tidb")) {
            field = F_TIDB;
            r = read_tidb(s, m);
        } else if (key_is(start, end, "es")) {
            field = F_ES;
            if (read_literal(s, "null") == OK) {
                r = OK;
            } else {
                int integer;
                r = read_number(s, &integer, &m->es);
                if (r == OK && !integer) r = SLOW;
                m->has_es = r == OK;
            }
        } else {
            r = skip_member(s, &b->memo);
        }
        if (r != OK) return r;
        if (seen & field) return SLOW; /* a field given twice: leave it to the careful path */
        seen |= field;
        if ((r = after_item(s, '}')) == OK) break;
        if (r != MORE) return r;
    }
    skip_ws(s);
    if (s->p != s->end) return SLOW; /* text after the document */
    if ((seen & F_REQUIRED) != F_REQUIRED) return SLOW;
    if (!m->has_commit_ts) {
        /* Alibaba Canal: the commit ts from `es` (milliseconds) */
        if (!m->has_es) m->es = 0;
        if (m->es < 0 || m->es >= ((int64_t)1 << 45)) return SLOW;
        m->commit_ts = m->es << 18;
    }
    /* the before image of an UPDATE is `old` when it holds the same columns in order */
    if (m->op == OP_UPDATE && (!m->has_old || !same_keys(&b->before.keys, m->before.keys,
                                                         &b->after.keys, m->after.keys)))
        return SLOW;
    return OK;
}

/* ---- the batch ----------------------------------------------------------------------------- */

static int image_init(Image *im) {
    if (strings_init(&im->keys) < 0) return -1;
    return strings_init(&im->values);
}

static void image_free(Image *im) {
    strings_free(&im->keys);
    strings_free(&im->values);
}

static int same_span(Span a, Span b) {
    return a.end - a.start == b.end - b.start && !memcmp(a.start, b.start, (size_t)(a.end - a.start));
}

/* The number of fast message m's shape, a JSON array [database, table, mysqlType, pkNames,
   [data keys]]: the previous fast message's number if the shape is the same, else a new one
   (its text written). */
static int shape_id(Batch *b, Message *m, int32_t *id) {
    Py_ssize_t keys = m->raw_keys.len - 1; /* (its last comma) */
    if (b->shape.count && same_span(m->database, b->last_database) &&
        same_span(m->table, b->last_table) && same_span(m->mysql_type, b->last_mysql_type) &&
        same_span(m->pk_names, b->last_pk_names) && b->last_keys.len == keys &&
        !memcmp(b->last_keys.p, m->raw_keys.p, (size_t)keys)) {
        *id = (int32_t)(b->shape.count - 1);
        return 0;
    }
    if (b->shape.count >= INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many shapes in one batch");
        return -1;
    }
    Buf *sh = &b->shape.bytes;
    if (buf_put(sh, "[", 1) < 0 ||
        buf_put(sh, m->database.start, m->database.end - m->database.start) < 0 ||
        buf_put(sh, ",", 1) < 0 ||
        buf_put(sh, m->table.start, m->table.end - m->table.start) < 0 ||
        buf_put(sh, ",", 1) < 0 ||
        buf_put(sh, m->mysql_type.start, m->mysql_type.end - m->mysql_type.start) < 0 ||
        buf_put(sh, ",", 1) < 0 ||
        buf_put(sh, m->pk_names.start, m->pk_names.end - m->pk_names.start) < 0 ||
        buf_put(sh, ",[", 2) < 0 || buf_put(sh, m->raw_keys.p, keys) < 0 ||
        buf_put(sh, "]]", 2) < 0 || strings_close(&b->shape, 1) < 0)
        return -1;
    b->last_keys.len = 0;
    if (buf_put(&b->last_keys, m->raw_keys.p, keys) < 0) return -1;
    b->last_database = m->database;
    b->last_table = m->table;
    b->last_mysql_type = m->mysql_type;
    b->last_pk_names = m->pk_names;
    *id = (int32_t)(b->shape.count - 1);
    return 0;
}

/* Settles message m's entries in the batch (fast: keeps them; slow: drops them, and the
   message gets empty ones). */
static int settle(Batch *b, Message *m, int fast) {
    int32_t id = -1;
    int r;
    char status = fast ? 0 : 1, op = fast ? (char)m->op : 0, key_only = fast && m->key_only;
    int64_t ts = fast ? m->commit_ts : 0;
    char before_null = !fast || m->op == OP_INSERT, after_null = !fast || m->op == OP_DELETE;
    if (buf_put(&b->status, &status, 1) < 0 || buf_put(&b->op, &op, 1) < 0 ||
        buf_put(&b->key_only, &key_only, 1) < 0 || buf_put(&b->commit_ts, &ts, 8) < 0 ||
        buf_put(&b->before_null, &before_null, 1) < 0 ||
        buf_put(&b->after_null, &after_null, 1) < 0)
        return -1;
    if (!fast) {
        image_rewind(&b->before, m->before);
        image_rewind(&b->after, m->after);
        strings_rewind(&b->database, m->database_mark);
        strings_rewind(&b->table, m->table_mark);
    } else {
        if ((r = shape_id(b, m, &id)) < 0) return -1;
        if (m->op != OP_UPDATE) image_rewind(&b->before, m->before); /* an ignored `old` */
        if (m->op == OP_DELETE) { /* the data row is the before image */
            if (strings_copy(&b->before.keys, &b->after.keys, m->after.keys) < 0 ||
                strings_copy(&b->before.values, &b->after.values, m->after.values) < 0)
                return -1;
            image_rewind(&b->after, m->after);
        }
    }
    if (strings_close(&b->database, 1) < 0 || strings_close(&b->table, 1) < 0 ||
        buf_i32(&b->shape_ids, id) < 0)
        return -1;
    if (b->before.keys.count > INT32_MAX || b->after.keys.count > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "too many image entries in one batch");
        return -1;
    }
    if (buf_i32(&b->before_rows, (int32_t)b->before.keys.count) < 0 ||
        buf_i32(&b->after_rows, (int32_t)b->after.keys.count) < 0)
        return -1;
    return 0;
}

/* Validity bytes (one per entry) as an Arrow bitmap. */
static PyObject *bitmap(const Buf *valid) {
    Py_ssize_t n = valid->len;
    PyObject *out = PyByteArray_FromStringAndSize(NULL, (n + 7) / 8);
    if (!out) return NULL;
    unsigned char *bits = (unsigned char *)PyByteArray_AS_STRING(out);
    memset(bits, 0, (size_t)((n + 7) / 8));
    for (Py_ssize_t i = 0; i < n; i++)
        if (valid->p[i]) bits[i >> 3] |= (unsigned char)(1u << (i & 7));
    return out;
}

/* The result's types: named fields, so that Python reads `out.before.keys`, not `out[14]`
   (a field added or moved here cannot silently shift what the reader takes). */
static PyStructSequence_Field SCAN_FIELDS[] = {
    {"slow", "uint8 per message: 1 when the Python decoder must decode it (other columns "
             "hold blanks for it)"},
    {"ops", "uint8 per message: 1 INSERT, 2 UPDATE, 3 DELETE (0: slow)"},
    {"key_only", "uint8 per message: _tidb.onlyHandleKey (the row holds its handle key columns only)"},
    {"commit_ts", "int64 per message: _tidb.commitTs, or (without it) es << 18"},
    {"database_offsets", "int32 Arrow offsets of the database names"},
    {"database_bytes", "the database names' UTF-8"},
    {"table_offsets", "int32 Arrow offsets of the table names"},
    {"table_bytes", "the table names' UTF-8"},
    {"shape_ids", "int32 per message: its shape's number (-1: slow)"},
    {"shape_offsets", "int32 Arrow offsets of the shapes' texts"},
    {"shape_bytes", "the shapes' texts: JSON [database, table, mysqlType, pkNames, names]"},
    {"before", "the before images (ScanImage)"},
    {"after", "the after images (ScanImage)"},
    {NULL, NULL},
};
static PyStructSequence_Desc SCAN_DESC = {
    "ticdc_spark._canal_scan.ScanResult", "The changelog buffers of a batch of messages.",
    SCAN_FIELDS, 13};

static PyStructSequence_Field IMAGE_FIELDS[] = {
    {"map_offsets", "int32 Arrow offsets (n + 1): each message's first map entry"},
    {"nulls", "uint8 per message: 1 when the message has no such image"},
    {"key_offsets", "int32 Arrow offsets of the entries' column names"},
    {"keys", "the column names' UTF-8"},
    {"value_offsets", "int32 Arrow offsets of the entries' values"},
    {"values", "the values' UTF-8"},
    {"value_validity", "Arrow validity bitmap of the values (0: JSON null)"},
    {NULL, NULL},
};
static PyStructSequence_Desc IMAGE_DESC = {
    "ticdc_spark._canal_scan.ScanImage", "One row image column as Arrow map buffers.",
    IMAGE_FIELDS, 7};

static PyTypeObject *ScanResultType, *ScanImageType;

/* A struct sequence of `type` holding `items` (all stolen; NULL when one of them is). */
static PyObject *struct_of(PyTypeObject *type, PyObject **items, Py_ssize_t n) {
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!items[i]) goto done;
    if (!(out = PyStructSequence_New(type))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyStructSequence_SET_ITEM(out, i, items[i]);
        items[i] = NULL;
    }
done:
    for (Py_ssize_t i = 0; i < n; i++) Py_XDECREF(items[i]);
    return out;
}

static PyObject *image_result(Image *im, Buf *rows, Buf *nulls) {
    PyObject *items[] = {buf_take(rows),          buf_take(nulls),
                         buf_take(&im->keys.offsets), buf_take(&im->keys.bytes),
                         buf_take(&im->values.offsets), buf_take(&im->values.bytes),
                         bitmap(&im->values.valid)};
    return struct_of(ScanImageType, items, 7);
}

static PyObject *build_result(Batch *b) {
    PyObject *items[] = {
        buf_take(&b->status),           buf_take(&b->op),
        buf_take(&b->key_only),         buf_take(&b->commit_ts),
        buf_take(&b->database.offsets), buf_take(&b->database.bytes),
        buf_take(&b->table.offsets),    buf_take(&b->table.bytes),
        buf_take(&b->shape_ids),        buf_take(&b->shape.offsets),
        buf_take(&b->shape.bytes),
        image_result(&b->before, &b->before_rows, &b->before_null),
        image_result(&b->after, &b->after_rows, &b->after_null),
    };
    return struct_of(ScanResultType, items, 13);
}

static void batch_free(Batch *b) {
    Buf *bufs[] = {&b->status,     &b->op,         &b->key_only,  &b->commit_ts,
                   &b->before_rows, &b->after_rows, &b->before_null, &b->after_null,
                   &b->shape_ids,   &b->last_keys};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) buf_free(bufs[i]);
    strings_free(&b->database);
    strings_free(&b->table);
    strings_free(&b->shape);
    image_free(&b->before);
    image_free(&b->after);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    Py_buffer data, offsets;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &offsets)) return NULL;
    PyObject *result = NULL;
    Batch b;
    Message m;
    memset(&b, 0, sizeof b);
    memset(&m, 0, sizeof m);
    Py_ssize_t n = offsets.len / (Py_ssize_t)sizeof(int32_t) - 1;
    const int32_t *offs = (const int32_t *)offsets.buf;
    if (offsets.len % (Py_ssize_t)sizeof(int32_t) || n < 0) {
        PyErr_SetString(PyExc_ValueError, "offsets must hold n + 1 int32 values");
        goto done;
    }
    if (strings_init(&b.database) < 0 || strings_init(&b.table) < 0 ||
        strings_init(&b.shape) < 0 || image_init(&b.before) < 0 || image_init(&b.after) < 0 ||
        buf_i32(&b.before_rows, 0) < 0 || buf_i32(&b.after_rows, 0) < 0)
        goto done;
    /* Room sized by the input (not by anything a message says): images hold about half of
       a message's bytes, so growing the largest buffers by doubling (a copy each time, and
       fresh pages) is mostly avoided. */
    Py_ssize_t input = n > 0 && offs[0] >= 0 && offs[n] >= offs[0] && offs[n] <= data.len
                           ? offs[n] - offs[0] /* this column's messages, not its parent's */
                           : 0;
    if (buf_reserve(&b.after.values.bytes, input / 2) < 0 ||
        buf_reserve(&b.before.values.bytes, input / 4) < 0 ||
        buf_reserve(&b.after.keys.bytes, input / 8) < 0)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t start = offs[i], stop = offs[i + 1];
        if (start < 0 || stop < start || stop > data.len) {
            PyErr_SetString(PyExc_ValueError, "offsets outside the data buffer");
            goto done;
        }
        m.raw_keys.len = 0;
        m.op = m.key_only = m.has_commit_ts = m.has_es = m.has_old = 0;
        m.commit_ts = m.es = 0;
        m.database.start = m.database.end = m.table.start = m.table.end = NULL;
        m.before = image_mark(&b.before);
        m.after = image_mark(&b.after);
        m.database_mark = strings_mark(&b.database);
        m.table_mark = strings_mark(&b.table);
        Scan s = {(const unsigned char *)data.buf + start, (const unsigned char *)data.buf + stop};
        int r = read_message(&s, &m, &b);
        if (r == FAIL || settle(&b, &m, r == OK) < 0) goto done;
    }
    result = build_result(&b);
done:
    batch_free(&b);
    buf_free(&m.raw_keys);
    PyBuffer_Release(&data);
    PyBuffer_Release(&offsets);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, offsets) -> the changelog buffers of a batch of Canal-JSON messages"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_canal_scan",
    .m_doc = "Canal-JSON row messages straight into changelog Arrow buffers.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__canal_scan(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
    if (!ScanResultType && !(ScanResultType = PyStructSequence_NewType(&SCAN_DESC))) return NULL;
    if (!ScanImageType && !(ScanImageType = PyStructSequence_NewType(&IMAGE_DESC))) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "ScanResult", (PyObject *)ScanResultType) < 0 ||
        PyModule_AddObjectRef(m, "ScanImage", (PyObject *)ScanImageType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
