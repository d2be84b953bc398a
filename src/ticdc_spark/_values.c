/*
 * _values: the codecs' per-column loops, compiled, both ways.
 *
 * Why C: a row is a loop over its columns.  Decoding checks each wire value and turns it into
 * the canonical Python value (int, float, datetime, ...); encoding formats each canonical value
 * as MySQL text and writes it the way Go's encoding/json writes it.  In Python the loop itself
 * (dict lookups, a function call per value) costs more than the JSON parsing or writing
 * around it.  No library converts between MySQL's text forms and Python's datetime/timedelta/
 * Decimal objects, or writes Go's JSON, so the loops are written here once, for every codec.
 *
 * The contract that keeps it simple and safe: each function returns what it built, or None
 * when anything is not plainly right (a column the plan does not know, a type code that
 * differs, a value of an unexpected type, a conversion that raised, a plan value out of
 * range).  The caller then runs its Python loop, which gives the same answer or the precise
 * error.  So this module only has to be right about what it accepts; the tests compare it
 * with the Python loops.  Errors that are not ordinary Exceptions (KeyboardInterrupt, ...)
 * propagate.
 *
 * Each column comes with a kind (what this module knows how to convert) and the codec's own
 * Python function for it.  Values outside the kind's strict fast syntax, or of another type,
 * are handed to that function, so the result never differs from the Python loop's.
 *
 * Sections: strict text syntaxes and the decoding conversions; Canal-JSON text rows and Open
 * Protocol column objects (decoding); output buffers, Go's JSON escaping, float and temporal
 * text, and the writers text_object, canal_rows, column_object (encoding); fractional-second
 * digits.
 *
 * Nothing here allocates from a length read in a message: values are Python objects already
 * parsed, the text syntaxes accepted are short and fixed, and output grows with what is
 * written.  It builds with GCC or Clang on POSIX (clock_gettime); SSE2, where present, scans
 * text 16 bytes at a time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* The kinds.  Their numbers have one definition, ticdc_spark/codec/compiled.py's Kind enum
   (it must exist without this module); setup.py passes each as -DK_<NAME>=<number>, with
   K_COUNT, and PyInit exports the numbers this module was built with as KINDS, which the tests
   compare with Kind.  What each kind means:
     K_STR          a str, kept
     K_INT          an int, or a decimal integer text
     K_INT_TEXT     an int, printed as text
     K_FLOAT32      a float (or number text) rounded to float32
     K_DOUBLE       a float, or number text
     K_DATE         YYYY-MM-DD
     K_DATETIME     YYYY-MM-DD hh:mm:ss[.f{1,6}]
     K_TIME         [-]h{1,4}:mm:ss[.f{1,6}]
     K_LATIN1       text whose code points are bytes
     K_DECIMAL      [-]digits[.digits] to decimal.Decimal
     K_CALL         always the codec's function
     K_BASE64       padded standard base64 to bytes
     K_BASE64_TEXT  padded standard base64 of UTF-8 to str
     K_GO_QUOTED    a Go-quoted string without escapes (ASCII) to bytes */
#define KIND_NAMES(X)                                                                         \
    X(STR) X(INT) X(INT_TEXT) X(FLOAT32) X(DOUBLE) X(DATE) X(DATETIME) X(TIME) X(LATIN1)      \
    X(DECIMAL) X(CALL) X(BASE64) X(BASE64_TEXT) X(GO_QUOTED)
#if !defined(K_COUNT) || !defined(K_STR) || !defined(K_INT) || !defined(K_INT_TEXT) ||       \
    !defined(K_FLOAT32) || !defined(K_DOUBLE) || !defined(K_DATE) || !defined(K_DATETIME) ||  \
    !defined(K_TIME) || !defined(K_LATIN1) || !defined(K_DECIMAL) || !defined(K_CALL) ||      \
    !defined(K_BASE64) || !defined(K_BASE64_TEXT) || !defined(K_GO_QUOTED)
#error "build with setup.py: the kind numbers come from ticdc_spark/codec/compiled.py's Kind"
#endif

static PyObject *DecimalType;

/* ---- strict text syntaxes ----------------------------------------------------------------- */

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }

static int digits_at(const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (!is_digit(s[i])) return 0;
    return 1;
}

static int number_at(const char *s, Py_ssize_t n) {
    int v = 0;
    for (Py_ssize_t i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

/* The ASCII text of a str, or NULL (not an exception) when it is not ASCII. */
static const char *ascii_of(PyObject *text, Py_ssize_t *n) {
    if (!PyUnicode_IS_ASCII(text)) return NULL;
    *n = PyUnicode_GET_LENGTH(text);
    return (const char *)PyUnicode_DATA(text);
}

/* [-]digits+[.digits+][e[+-]digits+]: returns 1 and the end of each part, or 0. */
static Py_ssize_t skip_digits(const char *s, Py_ssize_t i, Py_ssize_t n) {
    while (i < n && is_digit(s[i])) i++;
    return i;
}

static int plain_number(const char *s, Py_ssize_t n, int allow_exponent) {
    Py_ssize_t i = (n > 0 && s[0] == '-') ? 1 : 0, j;
    j = skip_digits(s, i, n);
    if (j == i) return 0;
    if (j < n && s[j] == '.') {
        i = j + 1;
        j = skip_digits(s, i, n);
        if (j == i) return 0;
    }
    if (allow_exponent && j < n && (s[j] == 'e' || s[j] == 'E')) {
        i = j + 1;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        j = skip_digits(s, i, n);
        if (j == i) return 0;
    }
    return j == n;
}

static PyObject *int_of_text(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s) return NULL;
    Py_ssize_t start = (n > 0 && s[0] == '-') ? 1 : 0;
    if (n == start || !digits_at(s + start, n - start)) return NULL;
    if (n - start <= 18) {
        long long v = 0;
        for (Py_ssize_t i = start; i < n; i++) v = v * 10 + (s[i] - '0');
        return PyLong_FromLongLong(start ? -v : v);
    }
    return PyLong_FromString(s, NULL, 10); /* str data is NUL-terminated */
}

static int double_of_text(PyObject *text, double *out) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || !plain_number(s, n, 1)) return 0;
    char *end;
    double d = PyOS_string_to_double(s, &end, NULL); /* overflow gives +-inf, as float() */
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != s + n) return 0;
    *out = d;
    return 1;
}

/* "." followed by 1-6 digits at s[i..n): the microseconds, or -1. */
static int fraction_at(const char *s, Py_ssize_t i, Py_ssize_t n) {
    if (i == n) return 0;
    Py_ssize_t digits = n - i - 1;
    if (s[i] != '.' || digits < 1 || digits > 6 || !digits_at(s + i + 1, digits)) return -1;
    int us = number_at(s + i + 1, digits);
    for (Py_ssize_t k = digits; k < 6; k++) us *= 10;
    return us;
}

static int date_at(const char *s) {
    return digits_at(s, 4) && s[4] == '-' && digits_at(s + 5, 2) && s[7] == '-' &&
           digits_at(s + 8, 2);
}

static int clock_at(const char *s) {
    return digits_at(s, 2) && s[2] == ':' && digits_at(s + 3, 2) && s[5] == ':' &&
           digits_at(s + 6, 2);
}

/* A double rounded to float32 as struct.pack("<f") rounds it; where that overflows,
   types.to_float32 gives an infinity of the same sign.  (A C cast of an out-of-range double
   to float is undefined, so the boundary, the midpoint above FLT_MAX, is tested first.) */
static double to_float32(double d) {
    if (isnan(d) || fabs(d) < 0x1.ffffffp+127) return (double)(float)d;
    return copysign(INFINITY, d);
}

/* The conversions below return a new reference, or NULL with or without an exception set
   when the fast syntax does not apply; the caller then asks the codec's function. */

static PyObject *date_of_text(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || n != 10 || !date_at(s)) return NULL;
    return PyDate_FromDate(number_at(s, 4), number_at(s + 5, 2), number_at(s + 8, 2));
}

static PyObject *datetime_of_text(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || n < 19 || !date_at(s) || s[10] != ' ' || !clock_at(s + 11)) return NULL;
    int us = fraction_at(s, 19, n);
    if (us < 0) return NULL;
    return PyDateTime_FromDateAndTime(number_at(s, 4), number_at(s + 5, 2), number_at(s + 8, 2),
                                      number_at(s + 11, 2), number_at(s + 14, 2),
                                      number_at(s + 17, 2), us);
}

static PyObject *time_of_text(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s) return NULL;
    int negative = n > 0 && s[0] == '-';
    Py_ssize_t i = negative, colon = skip_digits(s, i, n);
    Py_ssize_t hours = colon - i;
    if (hours < 1 || hours > 4 || n < colon + 6 || s[colon] != ':' ||
        !digits_at(s + colon + 1, 2) || s[colon + 3] != ':' || !digits_at(s + colon + 4, 2))
        return NULL;
    int minutes = number_at(s + colon + 1, 2), seconds = number_at(s + colon + 4, 2);
    int us = fraction_at(s, colon + 6, n);
    if (us < 0 || minutes > 59 || seconds > 59) return NULL;
    int total = (number_at(s + i, hours) * 60 + minutes) * 60 + seconds;
    int sign = negative ? -1 : 1;
    return PyDelta_FromDSU(0, sign * total, sign * us); /* normalizes, as -timedelta(...) */
}

static PyObject *decimal_of_text(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || !plain_number(s, n, 0)) return NULL;
    return PyObject_CallOneArg(DecimalType, text);
}

/* Padded standard base64 (what Go's encoding/json writes for []byte) into bytes.  Anything
   else, including nonzero bits after the last byte, is left to the codec's function. */
static signed char B64[256];

static PyObject *bytes_of_base64(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || n % 4) return NULL;
    Py_ssize_t pad = 0;
    if (n && s[n - 1] == '=') pad = (s[n - 2] == '=') ? 2 : 1;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n / 4 * 3 - pad); /* from the str's size */
    if (!out) return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i += 4) {
        int last = i + 4 == n, a = B64[(unsigned char)s[i]], b = B64[(unsigned char)s[i + 1]];
        int c = (last && pad == 2) ? 0 : B64[(unsigned char)s[i + 2]];
        int d = (last && pad >= 1) ? 0 : B64[(unsigned char)s[i + 3]];
        if ((a | b | c | d) < 0 || (last && pad == 2 && (b & 15)) || (last && pad == 1 && (c & 3)))
            goto refuse;
        unsigned v = (unsigned)a << 18 | (unsigned)b << 12 | (unsigned)c << 6 | (unsigned)d;
        o[k++] = (unsigned char)(v >> 16);
        if (!(last && pad == 2)) o[k++] = (unsigned char)(v >> 8);
        if (!(last && pad >= 1)) o[k++] = (unsigned char)v;
    }
    return out;
refuse:
    Py_DECREF(out);
    return NULL;
}

static PyObject *text_of_base64(PyObject *text) {
    PyObject *raw = bytes_of_base64(text);
    if (!raw) return NULL;
    PyObject *out = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(raw), PyBytes_GET_SIZE(raw), NULL);
    Py_DECREF(raw);
    return out;
}

static PyObject *bytes_of_go_quoted(PyObject *text) {
    Py_ssize_t n;
    const char *s = ascii_of(text, &n);
    if (!s || memchr(s, '\\', n)) return NULL;
    return PyBytes_FromStringAndSize(s, n);
}

static PyObject *latin1_of_text(PyObject *text) { return PyUnicode_AsLatin1String(text); }

/* The kinds whose wire value is a text, by kind (spec_int keeps kinds within the table). */
static PyObject *(*const FROM_TEXT[K_COUNT])(PyObject *) = {
    [K_DATE] = date_of_text,          [K_DATETIME] = datetime_of_text,
    [K_TIME] = time_of_text,          [K_LATIN1] = latin1_of_text,
    [K_DECIMAL] = decimal_of_text,    [K_BASE64] = bytes_of_base64,
    [K_BASE64_TEXT] = text_of_base64, [K_GO_QUOTED] = bytes_of_go_quoted,
};

/* A plan's small int (a kind, an fsp) within [low, high]; 0, or -1 to give up (the plan is
   not one this module understands). */
static int spec_int(PyObject *obj, int low, int high, int *out) {
    int overflow;
    long v = PyLong_AsLongAndOverflow(obj, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow || v < low || v > high) return -1;
    *out = (int)v;
    return 0;
}
#define KIND_MAX (K_COUNT - 1) /* setup.py checks that the numbers are 0..K_COUNT-1 */

/* A wire value converted per its kind: a new reference, or NULL with an exception. */
static PyObject *convert(int kind, PyObject *v, PyObject *fallback) {
    PyObject *r = NULL;
    double d;
    switch (kind) {
    case K_STR:
        if (PyUnicode_CheckExact(v)) return Py_NewRef(v);
        break;
    case K_INT:
        if (PyLong_CheckExact(v)) return Py_NewRef(v);
        if (PyUnicode_CheckExact(v)) r = int_of_text(v);
        break;
    case K_INT_TEXT:
        if (PyLong_CheckExact(v)) return PyObject_Str(v);
        break;
    case K_FLOAT32:
    case K_DOUBLE:
        if (PyFloat_CheckExact(v))
            d = PyFloat_AS_DOUBLE(v);
        else if (!PyUnicode_CheckExact(v) || !double_of_text(v, &d))
            break;
        /* float32 rounding as struct.pack("<f"), which to_float32 uses: out of range is inf */
        return PyFloat_FromDouble(kind == K_FLOAT32 ? to_float32(d) : d);
    default: /* the kinds read from text only */
        if (FROM_TEXT[kind] && PyUnicode_CheckExact(v)) r = FROM_TEXT[kind](v);
        break;
    }
    if (r) return r;
    /* the fast syntax did not apply: the codec's function decides (an error that is not an
       ordinary Exception, such as KeyboardInterrupt, propagates) */
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
        PyErr_Clear();
    }
    return PyObject_CallOneArg(fallback, v);
}

/* NULL with an exception that is not an ordinary Exception (KeyboardInterrupt, ...) must
   propagate; any other failure means "use the Python loop". */
static PyObject *defer(void) {
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return NULL;
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}

/* image[name] = value converted per the plan's kind (an int object) and function; -1 to
   give up. */
static int put_converted(PyObject *image, PyObject *name, PyObject *kind_obj, PyObject *value,
                         PyObject *function) {
    int kind;
    if (spec_int(kind_obj, 0, KIND_MAX, &kind) < 0) return -1;
    PyObject *out = convert(kind, value, function);
    int r = out ? PyDict_SetItem(image, name, out) : -1;
    Py_XDECREF(out);
    return r;
}

/* ---- Canal-JSON: text values ---------------------------------------------------------------

   text_image(converts, raw, known) -> dict | None
     converts: tuple of (name, kind, function) for the columns whose text is not their value
     raw:      the `data`/`old` row as parsed
     known:    a dict whose keys are the columns of mysqlType
   Every value must be a str or None and every column known. */
static PyObject *text_image(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0]) || !PyDict_Check(args[1]) ||
        !PyDict_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "text_image(converts, raw, known)");
        return NULL;
    }
    PyObject *converts = args[0], *raw = args[1], *known = args[2];
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(raw, &pos, &key, &value)) {
        if (value != Py_None && !PyUnicode_CheckExact(value)) Py_RETURN_NONE;
        int found = PyDict_Contains(known, key);
        if (found <= 0) return defer();
    }
    PyObject *image = PyDict_Copy(raw);
    if (!image) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(converts);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *spec = PyTuple_GET_ITEM(converts, i);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 3) goto fail;
        PyObject *name = PyTuple_GET_ITEM(spec, 0);
        PyObject *text = PyDict_GetItemWithError(image, name); /* borrowed */
        if (!text || text == Py_None) {
            if (PyErr_Occurred()) goto fail;
            continue;
        }
        if (put_converted(image, name, PyTuple_GET_ITEM(spec, 1), text,
                          PyTuple_GET_ITEM(spec, 2)) < 0)
            goto fail;
    }
    return image;
fail:
    Py_DECREF(image);
    return defer();
}

/* ---- Open Protocol: column objects ---------------------------------------------------------

   column_image(entries, columns, any) -> dict | None
     entries: name -> (type code, flag, handle, kind, function), as the plan expects them;
              handle is `any` when it is not checked
     columns: the message's {"name": {"t": .., "f": .., "h": .., "v": ..}} object */
static PyObject *str_t, *str_f, *str_h, *str_v;

static int same(PyObject *column, PyObject *field, PyObject *expected) {
    PyObject *got = PyDict_GetItemWithError(column, field);
    if (!got) {
        if (PyErr_Occurred()) return -1;
        got = Py_None;
    }
    return PyObject_RichCompareBool(got, expected, Py_EQ);
}

static PyObject *column_image(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "column_image(entries, columns, any)");
        return NULL;
    }
    PyObject *entries = args[0], *columns = args[1], *any = args[2];
    PyObject *image = PyDict_New();
    if (!image) return NULL;
    PyObject *name, *column;
    Py_ssize_t pos = 0;
    while (PyDict_Next(columns, &pos, &name, &column)) {
        PyObject *entry = PyDict_GetItemWithError(entries, name);
        if (!entry || !PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 5 ||
            !PyDict_CheckExact(column))
            goto fail;
        /* "t" must be present (the Python loop's error says so) and equal */
        PyObject *code = PyDict_GetItemWithError(column, str_t);
        if (!code || PyObject_RichCompareBool(code, PyTuple_GET_ITEM(entry, 0), Py_EQ) != 1 ||
            same(column, str_f, PyTuple_GET_ITEM(entry, 1)) != 1)
            goto fail;
        PyObject *handle = PyTuple_GET_ITEM(entry, 2);
        if (handle != any && same(column, str_h, handle) != 1) goto fail;
        PyObject *value = PyDict_GetItemWithError(column, str_v);
        if (!value && PyErr_Occurred()) goto fail;
        if (!value || value == Py_None) {
            if (PyDict_SetItem(image, name, Py_None) < 0) goto fail;
        } else if (put_converted(image, name, PyTuple_GET_ITEM(entry, 3), value,
                                 PyTuple_GET_ITEM(entry, 4)) < 0) {
            goto fail;
        }
    }
    return image;
fail:
    Py_DECREF(image);
    return defer();
}

/* ---- encoding: canonical values to MySQL text, written as Go writes JSON -------------------

   The formatting kinds (compiled.py's text_kind picks them from the column type):
     K_STR       str kept, int printed (Python's str() of either)
     K_DATE      date as YYYY-MM-DD
     K_DATETIME  datetime with `fsp` fractional digits
     K_TIME      timedelta as MySQL TIME text ([-]hh:mm:ss[.f]), hours not wrapped
                 (for both, fsp -1 means unknown: six digits with the trailing zeros cut)
     K_LATIN1    bytes, each byte the code point of the same number
     K_DECIMAL   Decimal in positional notation (format(v, "f"))
     K_FLOAT32, K_DOUBLE   float as Go's FormatFloat(v, 'f', -1, 32 or 64)
   Any other kind, or a value of another type: the codec's formatter. */

typedef struct {
    char *p;
    Py_ssize_t len, cap;
} Out;

static int out_grow(Out *o, Py_ssize_t extra) {
    if (o->len + extra <= o->cap) return 0;
    Py_ssize_t cap = o->cap ? o->cap : 1024;
    while (cap < o->len + extra) cap *= 2;
    char *p = PyMem_Realloc(o->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    o->p = p;
    o->cap = cap;
    return 0;
}

/* A string literal, its length counted by the compiler. */
#define out_literal(o, text) out_put((o), (text), (Py_ssize_t)sizeof(text) - 1)

static int out_put(Out *o, const char *src, Py_ssize_t n) {
    if (out_grow(o, n) < 0) return -1;
    memcpy(o->p + o->len, src, n);
    o->len += n;
    return 0;
}

/* A JSON string as Go's encoding/json writes it: <, >, & and U+2028/9 escaped, control
   characters as \u00xx except \n \r \t.  A str that is not valid UTF-8 (lone surrogates)
   fails, as orjson does on the Python path. */
/* Bytes Go's JSON writer escapes, and 0xE2 (the lead byte of U+2028/9): set at import. */
static unsigned char JSON_SPECIAL[256];

/* The escape of a special byte at s[i], or 0 bytes when it needs none (an 0xE2 that does not
   start U+2028/9). */
static int json_escape(const char *s, Py_ssize_t i, Py_ssize_t n, char *esc) {
    static const char hex[] = "0123456789abcdef";
    unsigned char c = (unsigned char)s[i];
    switch (c) {
    case '"': memcpy(esc, "\\\"", 2); return 2;
    case '\\': memcpy(esc, "\\\\", 2); return 2;
    case '\n': memcpy(esc, "\\n", 2); return 2;
    case '\r': memcpy(esc, "\\r", 2); return 2;
    case '\t': memcpy(esc, "\\t", 2); return 2;
    case 0xE2:
        if (i + 2 >= n || (unsigned char)s[i + 1] != 0x80 || ((unsigned char)s[i + 2] & 0xFE) != 0xA8)
            return 0;
        memcpy(esc, (s[i + 2] & 1) ? "\\u2029" : "\\u2028", 6);
        return 6;
    default: /* control characters, < > & */
        memcpy(esc, "\\u00", 4);
        esc[4] = hex[c >> 4], esc[5] = hex[c & 15];
        return 6;
    }
}

/* The index of the first byte at or after i that JSON_SPECIAL marks, or n.  Texts are mostly
   plain: SSE2 (every x86-64 has it) looks at 16 bytes at a time; elsewhere a byte at a
   time. */
static Py_ssize_t plain_until(const unsigned char *s, Py_ssize_t i, Py_ssize_t n) {
#ifdef __SSE2__
    const __m128i below = _mm_set1_epi8(0x1F), quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\'), lt = _mm_set1_epi8('<');
    const __m128i gt = _mm_set1_epi8('>'), amp = _mm_set1_epi8('&');
    const __m128i e2 = _mm_set1_epi8((char)0xE2);
    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i hit = _mm_cmpeq_epi8(_mm_max_epu8(x, below), below); /* x <= 0x1F */
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, quote));
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, backslash));
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, lt));
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, gt));
        hit = _mm_or_si128(hit, _mm_cmpeq_epi8(x, amp));
        int mask = _mm_movemask_epi8(hit) | _mm_movemask_epi8(_mm_cmpeq_epi8(x, e2));
        if (mask) return i + __builtin_ctz((unsigned)mask);
    }
#endif
    while (i < n && !JSON_SPECIAL[s[i]]) i++;
    return i;
}

static int out_json_utf8(Out *o, const char *s, Py_ssize_t n) {
    if (out_grow(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    Py_ssize_t start = 0, i = 0;
    for (;;) {
        i = plain_until((const unsigned char *)s, i, n);
        if (i == n) break;
        char esc[6];
        int width = json_escape(s, i, n, esc);
        if (!width) {
            i++;
            continue;
        }
        if (out_put(o, s + start, i - start) < 0 || out_put(o, esc, width) < 0) return -1;
        i += (unsigned char)s[i] == 0xE2 ? 3 : 1;
        start = i;
    }
    if (out_put(o, s + start, n - start) < 0 || out_grow(o, 1) < 0) return -1;
    o->p[o->len++] = '"';
    return 0;
}

/* Bytes as the JSON string of the text whose code points they are (Latin-1). */
static int out_json_latin1(Out *o, const unsigned char *s, Py_ssize_t n) {
    /* room for two bytes per input byte and the quotes; only escapes need more */
    if (out_grow(o, 2 * n + 2) < 0) return -1;
    char *p = o->p + o->len;
    *p++ = '"';
    /* a byte at a time: binary values are mostly not plain text, so scanning ahead for
       plain runs (as out_json_utf8 does) costs more than it saves */
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = s[i];
        if (c >= 0x80) {
            *p++ = (char)(0xC0 | c >> 6);
            *p++ = (char)(0x80 | (c & 0x3F));
        } else if (JSON_SPECIAL[c]) {
            o->len = p - o->p;
            if (out_grow(o, 6 + 2 * (n - i) + 1) < 0) return -1;
            p = o->p + o->len;
            p += json_escape((const char *)s, i, n, p);
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    o->len = p - o->p;
    return 0;
}

/* The code point of the well-formed UTF-8 sequence at s[i..n) and its length, or 0 when the
   bytes there are not one (Python's strict decoder rejects the same: overlongs, surrogates,
   code points over U+10FFFF, truncated sequences). */
static int utf8_at(const unsigned char *s, Py_ssize_t i, Py_ssize_t n, Py_UCS4 *code) {
    unsigned char c = s[i];
    int len;
    unsigned char low = 0x80, high = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2, *code = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, *code = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, *code = c & 0x07;
    else return 0;
    if (c == 0xE0) low = 0xA0;
    else if (c == 0xED) high = 0x9F;
    else if (c == 0xF0) low = 0x90;
    else if (c == 0xF4) high = 0x8F;
    if (n - i < len || s[i + 1] < low || s[i + 1] > high) return 0;
    for (int k = 1; k < len; k++) {
        if (k > 1 && (s[i + k] & 0xC0) != 0x80) return 0;
        *code = *code << 6 | (s[i + k] & 0x3F);
    }
    return len;
}

/* Go's strconv.Quote of bytes, without the quotes, as gotext.go_quote writes it: bytes that
   are not UTF-8 as \xNN, the short escapes, other ASCII controls as \xNN, non-printable code
   points as \uNNNN/\UNNNNNNNN, printable ones as they are. */
static int out_go_quoted(Out *q, const unsigned char *s, Py_ssize_t n) {
    static const char hex[] = "0123456789abcdef";
    for (Py_ssize_t i = 0; i < n;) {
        unsigned char c = s[i];
        char buf[12];
        int width = 0;
        Py_UCS4 code;
        int len = c < 0x80 ? 1 : utf8_at(s, i, n, &code);
        const char *simple = NULL;
        switch (c) {
        case 0x07: simple = "\\a"; break;
        case 0x08: simple = "\\b"; break;
        case 0x0C: simple = "\\f"; break;
        case 0x0A: simple = "\\n"; break;
        case 0x0D: simple = "\\r"; break;
        case 0x09: simple = "\\t"; break;
        case 0x0B: simple = "\\v"; break;
        case 0x5C: simple = "\\\\"; break;
        case 0x22: simple = "\\\""; break;
        }
        if (simple) {
            memcpy(buf, simple, 2), width = 2;
        } else if (c < 0x80) {
            if (c >= 0x20 && c < 0x7F)
                buf[0] = (char)c, width = 1;
            else
                buf[0] = '\\', buf[1] = 'x', buf[2] = hex[c >> 4], buf[3] = hex[c & 15], width = 4;
        } else if (!len) { /* not UTF-8: this one byte */
            buf[0] = '\\', buf[1] = 'x', buf[2] = hex[c >> 4], buf[3] = hex[c & 15], width = 4;
            len = 1;
        } else if (Py_UNICODE_ISPRINTABLE(code)) {
            memcpy(buf, s + i, len), width = len;
        } else {
            width = snprintf(buf, sizeof buf, code < 0x10000 ? "\\u%04x" : "\\U%08x",
                             (unsigned)code);
        }
        if (out_put(q, buf, width) < 0) return -1;
        i += len;
    }
    return 0;
}

static int out_json_str(Out *o, PyObject *text) {
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(text, &n);
    return s ? out_json_utf8(o, s, n) : -1;
}

/* Padded standard base64 of n bytes, as a JSON string. */
static int out_base64(Out *o, const unsigned char *s, Py_ssize_t n) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (out_grow(o, (n + 2) / 3 * 4 + 2) < 0) return -1;
    char *p = o->p + o->len;
    *p++ = '"';
    Py_ssize_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        *p++ = alphabet[v >> 18], *p++ = alphabet[v >> 12 & 63];
        *p++ = alphabet[v >> 6 & 63], *p++ = alphabet[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0);
        *p++ = alphabet[v >> 18], *p++ = alphabet[v >> 12 & 63];
        *p++ = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        *p++ = '=';
    }
    *p++ = '"';
    o->len = p - o->p;
    return 0;
}

/* Decimal digits of an unsigned number. */
static int out_u64(Out *o, unsigned long long u) {
    char buf[24], *p = buf + sizeof buf;
    do *--p = (char)('0' + u % 10); while (u /= 10);
    return out_put(o, p, buf + sizeof buf - p);
}

/* An int as decimal digits (quoted: as a JSON string); beyond 64 bits (signed below zero,
   unsigned above) it fails, as orjson fails on the Python path. */
static int out_int(Out *o, PyObject *v, int quoted) {
    int overflow;
    unsigned long long u;
    int negative = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0) {
        u = PyLong_AsUnsignedLongLong(v);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    } else if (overflow < 0) {
        PyErr_SetString(PyExc_OverflowError, "an integer below -2^63");
        return -1;
    } else {
        negative = x < 0;
        u = negative ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    }
    char buf[24], *p = buf + sizeof buf;
    if (quoted) *--p = '"';
    do *--p = (char)('0' + u % 10); while (u /= 10);
    if (negative) *--p = '-';
    if (quoted) *--p = '"';
    return out_put(o, p, buf + sizeof buf - p);
}

/* `width` decimal digits of 0 <= v < 10^width, zero-padded. */
static void put_digits(char *p, int v, int width) {
    for (int i = width - 1; i >= 0; i--, v /= 10) p[i] = (char)('0' + v % 10);
}

/* The length of a temporal text with six fractional digits once trailing zeros are cut. */
static int trimmed(const char *text, int n) {
    while (text[n - 1] == '0') n--;
    return text[n - 1] == '.' ? n - 1 : n;
}

/* MySQL's TIME text of a timedelta into out (64 bytes); its length. */
static int time_chars(PyObject *v, int fsp, char *out) {
    long long seconds = (long long)PyDateTime_DELTA_GET_DAYS(v) * 86400 +
                        PyDateTime_DELTA_GET_SECONDS(v);
    long long us = PyDateTime_DELTA_GET_MICROSECONDS(v);
    const char *sign = "";
    if (seconds < 0) {
        sign = "-";
        if (us) {
            seconds = -seconds - 1;
            us = 1000000 - us;
        } else {
            seconds = -seconds;
        }
    }
    char *buf = out, frac[8];
    int n = 0;
    long long hours = seconds / 3600;
    if (*sign) buf[n++] = '-';
    int width = 2; /* %02lld */
    for (long long h = hours; h >= 100; h /= 10) width++;
    for (int k = width - 1; k >= 0; k--, hours /= 10) buf[n + k] = (char)('0' + hours % 10);
    n += width;
    buf[n++] = ':';
    put_digits(buf + n, (int)(seconds / 60 % 60), 2);
    buf[n + 2] = ':';
    put_digits(buf + n + 3, (int)(seconds % 60), 2);
    n += 5;
    int digits = fsp < 0 ? 6 : fsp;
    if (digits > 0) {
        put_digits(frac, (int)us, 6);
        buf[n++] = '.';
        memcpy(buf + n, frac, digits);
        n += digits;
    }
    return fsp < 0 ? trimmed(buf, n) : n;
}

/* Float text as TiCDC prints FLOAT and DOUBLE (Go's strconv.FormatFloat(v, 'f', -1, bits)),
   step for step as types.format_float does it, so that the two always agree: the shortest
   digits that read back (Python's repr for float64; for float32 the shortest '%.Ne' text
   that reads back through float32, found as format_float finds it), laid out without an
   exponent. */
static int float32_reads_back(const char *text, double value) {
    return to_float32(PyOS_string_to_double(text, NULL, NULL)) == value;
}

/* The shortest digits (no sign, no trailing zeros) of a finite non-zero magnitude whose
   repr has an exponent (float64) or that float32 holds, and the decimal exponent of the
   first digit; returns the number of digits, or -1 with an exception. */
/* Python's own float formatting ('r' is repr, 'e' with a precision is "%.Ne") into text. */
static int python_float_text(double value, char code, int precision, char *text, size_t size) {
    char *r = PyOS_double_to_string(value, code, precision, 0, NULL);
    if (!r) return -1;
    size_t len = strlen(r);
    if (len >= size) len = size - 1; /* never: at most 9 digits and an exponent */
    memcpy(text, r, len);
    text[len] = '\0';
    PyMem_Free(r);
    return 0;
}

static int shortest_digits(double value, int bits, char *digits, int *exponent) {
    char text[64];
    if (bits == 64) {
        if (python_float_text(value, 'r', 0, text, sizeof text) < 0) return -1;
    } else {
        /* a subnormal (below float32's smallest normal, 2^-126) has fewer significant bits:
           fewer than six digits may read back, so it is always bisected, from one digit */
        int normal = value >= 0x1p-126;
        if (python_float_text(value, 'e', 5, text, sizeof text) < 0) return -1;
        if (!normal || !float32_reads_back(text, value)) {
            /* the bisection of types._shortest_float32_text over 7..9 digits (1..9 for a
               subnormal); its default, nine digits, is always the last candidate tried when
               no shorter one reads back */
            int low = normal ? 6 : 0, high = 8;
            char candidate[64];
            while (low <= high) {
                int mid = (low + high) / 2;
                if (python_float_text(value, 'e', mid, candidate, sizeof candidate) < 0) return -1;
                if (float32_reads_back(candidate, value) || mid == 8) {
                    memcpy(text, candidate, sizeof text);
                    high = mid - 1;
                } else {
                    low = mid + 1;
                }
            }
        }
        if (PyErr_Occurred()) return -1;
    }
    /* d.ddde[+-]xx: both repr with an exponent and '%.Ne' are in this form */
    char *e = strchr(text, 'e');
    if (!e) {
        PyErr_SetString(PyExc_RuntimeError, "expected a float text with an exponent");
        return -1;
    }
    int n = 0;
    for (char *c = text; c < e; c++)
        if (is_digit(*c)) digits[n++] = *c;
    *exponent = atoi(e + 1);
    while (n > 1 && digits[n - 1] == '0') n--;
    if (n == 0) digits[n++] = '0';
    return n;
}

/* The text of a float into buf (800 bytes: 5e-324 has 324 zeros after the point); its
   length, or -1 with an exception. */
static int float_chars(double value, int bits, char *buf) {
    char digits[40];
    if (bits == 64 && isfinite(value) && value != 0) {
        char *r = PyOS_double_to_string(value, 'r', 0, 0, NULL);
        if (!r) return -1;
        size_t len = strlen(r);
        int positional = !strchr(r, 'e');
        if (positional) { /* repr is positional: cut a ".0" */
            if (len >= 2 && r[len - 2] == '.' && r[len - 1] == '0') len -= 2;
            memcpy(buf, r, len);
        }
        PyMem_Free(r);
        if (positional) return (int)len;
    }
    if (isnan(value)) return memcpy(buf, "NaN", 3), 3;
    if (isinf(value)) return memcpy(buf, value > 0 ? "+Inf" : "-Inf", 4), 4;
    int n = 0;
    if (signbit(value)) buf[n++] = '-';
    if (value == 0) {
        buf[n++] = '0';
        return n;
    }
    int exponent, count = shortest_digits(fabs(value), bits, digits, &exponent);
    if (count < 0) return -1;
    int point = exponent + 1; /* digits before the decimal point */
    if (point <= 0) {
        buf[n++] = '0', buf[n++] = '.';
        memset(buf + n, '0', -point), n += -point;
        memcpy(buf + n, digits, count), n += count;
    } else if (point >= count) {
        memcpy(buf + n, digits, count), n += count;
        memset(buf + n, '0', point - count), n += point - count;
    } else {
        memcpy(buf + n, digits, point), n += point;
        buf[n++] = '.';
        memcpy(buf + n, digits + point, count - point), n += count - point;
    }
    return n;
}

static PyObject *str_f_format;

/* Formatters run Python code, which may change the image being written; the Python loop
   would then see the change for the later columns.  Counting the calls lets a writer check
   afterwards that its image still holds the values it wrote (else it gives up). */
static unsigned long python_calls;

static void put_date(char *p, PyObject *v) { /* YYYY-MM-DD; years are 1..9999 */
    put_digits(p, PyDateTime_GET_YEAR(v), 4);
    p[4] = '-';
    put_digits(p + 5, PyDateTime_GET_MONTH(v), 2);
    p[7] = '-';
    put_digits(p + 8, PyDateTime_GET_DAY(v), 2);
}

/* A short ASCII text that needs no JSON escaping, as a JSON string. */
static int out_quoted_ascii(Out *o, const char *text, Py_ssize_t n) {
    if (out_grow(o, n + 2) < 0) return -1;
    o->p[o->len++] = '"';
    memcpy(o->p + o->len, text, n);
    o->len += n;
    o->p[o->len++] = '"';
    return 0;
}

/* The text of a canonical value, written as a JSON string; 0, or -1 with an exception. */
static int out_formatted(Out *o, int kind, int fsp, PyObject *v, PyObject *fallback) {
    char buf[800];
    int n;
    switch (kind) {
    case K_STR:
        if (PyUnicode_CheckExact(v)) return out_json_str(o, v);
        if (PyLong_CheckExact(v)) {
            int overflow;
            PyLong_AsLongLongAndOverflow(v, &overflow); /* an exact int: it cannot fail */
            if (!overflow) return out_int(o, v, 1);
            PyObject *text = PyObject_Str(v);
            int r = text ? out_json_str(o, text) : -1;
            Py_XDECREF(text);
            return r;
        }
        break;
    case K_DATE:
        if (!PyDate_CheckExact(v)) break;
        put_date(buf, v);
        return out_quoted_ascii(o, buf, 10);
    case K_DATETIME:
        if (!PyDateTime_CheckExact(v) || fsp > 6) break;
        put_date(buf, v);
        buf[10] = ' ';
        put_digits(buf + 11, PyDateTime_DATE_GET_HOUR(v), 2);
        buf[13] = ':';
        put_digits(buf + 14, PyDateTime_DATE_GET_MINUTE(v), 2);
        buf[16] = ':';
        put_digits(buf + 17, PyDateTime_DATE_GET_SECOND(v), 2);
        buf[19] = '.';
        put_digits(buf + 20, PyDateTime_DATE_GET_MICROSECOND(v), 6);
        return out_quoted_ascii(o, buf, fsp < 0 ? trimmed(buf, 26) : fsp ? 20 + fsp : 19);
    case K_TIME:
        if (!PyDelta_CheckExact(v) || fsp > 6) break;
        return out_quoted_ascii(o, buf, time_chars(v, fsp, buf));
    case K_LATIN1:
        if (!PyBytes_CheckExact(v)) break;
        return out_json_latin1(o, (const unsigned char *)PyBytes_AS_STRING(v),
                               PyBytes_GET_SIZE(v));
    case K_DECIMAL: {
        if (Py_TYPE(v) != (PyTypeObject *)DecimalType) break;
        /* str() is format(v, "f") unless it chose scientific notation (it has an E then),
           and is three times faster; its characters need no escaping */
        PyObject *text = PyObject_Str(v);
        if (!text) return -1;
        /* a finite value's text ends in a digit: NaN, sNaN and Infinity go to the formatter,
           which refuses them */
        Py_ssize_t length = PyUnicode_GET_LENGTH(text);
        if (!PyUnicode_IS_ASCII(text) || length == 0 ||
            !Py_ISDIGIT(((const char *)PyUnicode_DATA(text))[length - 1])) {
            Py_DECREF(text);
            break;
        }
        if (!memchr(PyUnicode_DATA(text), 'E', PyUnicode_GET_LENGTH(text)) &&
            !memchr(PyUnicode_DATA(text), 'e', PyUnicode_GET_LENGTH(text))) { /* capitals=0 */
            int r = out_quoted_ascii(o, PyUnicode_DATA(text), PyUnicode_GET_LENGTH(text));
            Py_DECREF(text);
            return r;
        }
        Py_DECREF(text);
        text = PyObject_Format(v, str_f_format);
        int r = text ? out_json_str(o, text) : -1;
        Py_XDECREF(text);
        return r;
    }
    case K_FLOAT32:
    case K_DOUBLE:
        /* float32 text of a value float32 cannot hold: the Python formatter raises */
        if (!PyFloat_CheckExact(v) || (kind == K_FLOAT32 && !(fabs(PyFloat_AS_DOUBLE(v)) <= FLT_MAX)))
            break;
        n = float_chars(PyFloat_AS_DOUBLE(v), kind == K_FLOAT32 ? 32 : 64, buf);
        return n < 0 ? -1 : out_quoted_ascii(o, buf, n);
    default:
        break;
    }
    python_calls++;
    PyObject *text = PyObject_CallOneArg(fallback, v);
    if (text && !PyUnicode_CheckExact(text)) {
        Py_DECREF(text);
        PyErr_SetString(PyExc_TypeError, "a formatter returned something other than a str");
        return -1;
    }
    int r = text ? out_json_str(o, text) : -1;
    Py_XDECREF(text);
    return r;
}

/* text_object(columns, image) -> bytes | None
     columns: tuple of (JSON key with its colon, name, kind, fsp, formatter), in output order
     image:   column name -> canonical value; absent columns are left out
   The JSON object {"name":"text"|null,...} of the image, as Canal-JSON's data/old rows. */
/* Where each column's value text went in an Out, so that an UPDATE's `old` can copy the
   text of the columns it shares (the very same object) with `data` instead of formatting
   them again. */
typedef struct {
    Out *out;
    Py_ssize_t *start, *len; /* per column; len -1 when the image lacks it */
    PyObject **value;        /* per column, the value written (borrowed from the image) */
} Spans;

/* One column's value of a text object: null, the twin's text of the same object, or its
   formatted text as a JSON string. */
static int out_value_text(Out *o, PyObject *spec, PyObject *value, Py_ssize_t i,
                          const Spans *twin) {
    if (value == Py_None) return out_literal(o, "null");
    if (twin && twin->len[i] >= 0 && twin->value[i] == value)
        return out_put(o, twin->out->p + twin->start[i], twin->len[i]);
    int kind, fsp;
    if (spec_int(PyTuple_GET_ITEM(spec, 2), 0, KIND_MAX, &kind) < 0 ||
        spec_int(PyTuple_GET_ITEM(spec, 3), -1, 6, &fsp) < 0)
        return -1;
    return out_formatted(o, kind, fsp, value, PyTuple_GET_ITEM(spec, 4));
}

/* Writes the JSON object of an image's text (see text_object); 0, or -1 to give up.
   `record` (or NULL) receives where each value went; `twin` (or NULL) is a recorded image
   whose texts are copied for the values it holds too. */
/* The image's value for each column spec (borrowed; NULL where the image lacks it), each
   prefetched: rows live apart in memory, and waiting for each value's first cache line in
   turn was what writing a row cost most.  The values are borrowed from the image: a writer
   that has let Python code run (python_calls moved) checks that the image still holds them
   before it uses another (`unchanged`).  Returns `stack` when it has room for them, else an
   array; free it with `release`.  NULL to give up: an image that is not exactly a dict (a
   subclass's __missing__ would answer differently from the Python loop's image[name]). */
#define GATHER_STACK 128
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(p) __builtin_prefetch(p)
#else
#define PREFETCH(p) ((void)(p))
#endif
static void release(PyObject **values, PyObject **stack) {
    if (values != stack) PyMem_Free(values);
}

/* Whether every key of a dict is exactly a str: looking one up then runs no Python code
   (a str subclass's __eq__ could change the dict under borrowed values). */
static int str_keys(PyObject *dict) {
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(dict, &pos, &key, &value))
        if (!PyUnicode_CheckExact(key)) return 0;
    return 1;
}

/* Whether the image still holds exactly `values` (see python_calls). */
static int unchanged(PyObject *columns, PyObject *image, PyObject **values) {
    if (!str_keys(image)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++) {
        PyObject *now = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(PyTuple_GET_ITEM(columns, i), 1));
        if (now != values[i]) return 0;
        if (!now && PyErr_Occurred()) return 0;
    }
    return 1;
}

static PyObject **gather(PyObject *columns, PyObject *image, PyObject **stack) {
    if (!PyTuple_Check(columns) || !PyDict_CheckExact(image) || !str_keys(image)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(columns);
    PyObject **values = count <= GATHER_STACK ? stack : PyMem_Malloc(count * sizeof *values);
    if (!values) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *spec = PyTuple_GET_ITEM(columns, i);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 5 ||
            !PyBytes_Check(PyTuple_GET_ITEM(spec, 0)))
            goto fail;
        values[i] = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(spec, 1));
        if (values[i]) PREFETCH(values[i]);
        else if (PyErr_Occurred()) goto fail;
    }
    return values;
fail:
    release(values, stack);
    return NULL;
}

static int out_text_object(Out *o, PyObject *columns, PyObject *image, Spans *record,
                           const Spans *twin) {
    PyObject *stack[GATHER_STACK], **values = gather(columns, image, stack);
    if (!values) return -1;
    int r = -1, first = 1;
    unsigned long calls = python_calls;
    if (out_literal(o, "{") < 0) goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++) {
        PyObject *spec = PyTuple_GET_ITEM(columns, i), *value = values[i];
        if (record) record->len[i] = -1, record->value[i] = value;
        if (!value) continue;
        PyObject *key = PyTuple_GET_ITEM(spec, 0);
        if ((!first && out_literal(o, ",") < 0) ||
            out_put(o, PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key)) < 0)
            goto done;
        first = 0;
        Py_ssize_t start = o->len;
        if (out_value_text(o, spec, value, i, twin) < 0) goto done;
        if (record) record->start[i] = start, record->len[i] = o->len - start;
        if (calls != python_calls) {
            /* A formatter ran Python code.  The borrowed values are alive, and what the
               Python loop would read, only if the image still holds them; the twin's record
               may describe objects that are gone, so its texts are no longer copied. */
            if (!unchanged(columns, image, values)) goto done;
            calls = python_calls;
            twin = NULL;
        }
    }
    r = out_literal(o, "}");
done:
    release(values, stack);
    return r;
}

static PyObject *out_bytes(Out *o) {
    PyObject *result = PyBytes_FromStringAndSize(o->p, o->len);
    PyMem_Free(o->p);
    return result;
}

static PyObject *text_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "text_object(columns, image)");
        return NULL;
    }
    Out o = {NULL, 0, 0};
    if (out_text_object(&o, args[0], args[1], NULL, NULL) < 0) {
        PyMem_Free(o.p);
        return defer();
    }
    return out_bytes(&o);
}

/* exceeding(limits, image) -> int
     limits: tuple of (name, largest, ...); bit i of the result is set when the image holds an
     int (exactly) above limit i's largest: Canal-JSON's sqlType promotes such unsigned
     integers to the next wider type. */
static int exceeding_bits(PyObject *limits, PyObject *image, unsigned long long *bits) {
    *bits = 0;
    Py_ssize_t count = PyTuple_GET_SIZE(limits);
    if (count > 64) {
        PyErr_SetString(PyExc_ValueError, "at most 64 limits");
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *limit = PyTuple_GET_ITEM(limits, i);
        if (!PyTuple_Check(limit) || PyTuple_GET_SIZE(limit) < 2) {
            PyErr_SetString(PyExc_TypeError, "a limit is a (name, largest, ...) tuple");
            return -1;
        }
        PyObject *value = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(limit, 0));
        if (!value) {
            if (PyErr_Occurred()) return -1;
            continue;
        }
        if (!PyLong_CheckExact(value)) continue;
        int over = PyObject_RichCompareBool(value, PyTuple_GET_ITEM(limit, 1), Py_GT);
        if (over < 0) return -1;
        if (over) *bits |= 1ULL << i;
    }
    return 0;
}

static PyObject *exceeding(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "exceeding(limits, image)");
        return NULL;
    }
    unsigned long long bits;
    if (exceeding_bits(args[0], args[1], &bits) < 0) return NULL;
    return PyLong_FromUnsignedLongLong(bits);
}

/* What canal_message needs of a table's CanalLayout (ticdc_spark/codec/compiled.py, which
   documents each field), read by attribute name once per run of one table's rows, so that a
   row costs what it cost when the layout was a tuple.  Strong references. */
typedef struct {
    PyObject *columns, *prefix, *mysql_types, *sql_types, *promotions, *promoted_sql_types;
    PyObject *insert_kind, *update_kind, *delete_kind;
} Layout;

static const struct {
    const char *name;
    size_t offset;
} LAYOUT_ATTRS[] = {
#define LAYOUT_ATTR(field) {#field, offsetof(Layout, field)}
    LAYOUT_ATTR(columns),     LAYOUT_ATTR(prefix),      LAYOUT_ATTR(mysql_types),
    LAYOUT_ATTR(sql_types),   LAYOUT_ATTR(promotions),  LAYOUT_ATTR(promoted_sql_types),
    LAYOUT_ATTR(insert_kind), LAYOUT_ATTR(update_kind), LAYOUT_ATTR(delete_kind),
#undef LAYOUT_ATTR
};
#define LAYOUT_COUNT (sizeof LAYOUT_ATTRS / sizeof *LAYOUT_ATTRS)
static PyObject *layout_names[LAYOUT_COUNT]; /* interned at init */

static inline PyObject **layout_slot(Layout *l, size_t i) {
    return (PyObject **)((char *)l + LAYOUT_ATTRS[i].offset);
}

static void layout_clear(Layout *l) {
    for (size_t i = 0; i < LAYOUT_COUNT; i++) Py_CLEAR(*layout_slot(l, i));
}

/* Reads `obj` into l: 1, or 0 (l cleared) when an attribute is missing (its error left
   pending, for defer) or of another type than canal_message writes from. */
static int layout_read(PyObject *obj, Layout *l) {
    layout_clear(l);
    for (size_t i = 0; i < LAYOUT_COUNT; i++)
        if (!(*layout_slot(l, i) = PyObject_GetAttr(obj, layout_names[i]))) goto bad;
    if (!PyTuple_Check(l->columns) || !PyBytes_Check(l->prefix) ||
        !PyBytes_Check(l->mysql_types) || !PyTuple_Check(l->promotions) ||
        !PyDict_Check(l->promoted_sql_types) ||
        (l->sql_types != Py_None && !PyBytes_Check(l->sql_types)))
        goto bad;
    return 1;
bad:
    layout_clear(l);
    return 0;
}

/* A Canal-JSON row message, for canal_rows (below).
     layout:    the table's Layout (read by layout_read)
     row:       a RowChange with full images
     ts_ms:     the "ts" field
   A whole Canal-JSON row message with a full `old` and no handle-key or claim-check marks
   (the encoder writes the others); None for anything else, or for an sqlType not yet seen,
   and the encoder writes it. */
static PyObject *str_kind, *str_before, *str_after, *str_commit_ts;
static Py_ssize_t canal_size_hint = 1024; /* the size of the last message (the GIL is held) */

/* The wall clock in ms, as time.time_ns() // 1_000_000. */
static long long now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* One row's message: bytes, None to leave it to the encoder, or NULL with an exception that
   must propagate. */
static PyObject *canal_message(const Layout *layout, PyObject *row, long long ts_ms,
                               int with_tidb) {
    if (ts_ms < 0) return defer();
    PyObject *prefix = layout->prefix, *mysql_types = layout->mysql_types;
    PyObject *sql_types = layout->sql_types;
    /* each attribute only while no error is pending (a property may run Python code) */
    PyObject *kind = PyObject_GetAttr(row, str_kind);
    PyObject *before = kind ? PyObject_GetAttr(row, str_before) : NULL;
    PyObject *after = before ? PyObject_GetAttr(row, str_after) : NULL;
    PyObject *ts = after ? PyObject_GetAttr(row, str_commit_ts) : NULL;
    Out o = {NULL, 0, 0}, d = {NULL, 0, 0}; /* the message, and its data row */
    Py_ssize_t *spans = NULL;
    PyObject *columns = layout->columns;
    const char *text;
    PyObject *data;
    if (!kind || !before || !after || !ts || !PyLong_CheckExact(ts)) goto fail;
    unsigned long long commit_ts = PyLong_AsUnsignedLongLong(ts);
    if (commit_ts == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
    if (kind == layout->insert_kind) text = "INSERT", data = after;
    else if (kind == layout->update_kind) text = "UPDATE", data = after;
    else if (kind == layout->delete_kind) text = "DELETE", data = before;
    else goto fail;
    if (sql_types == Py_None) { /* unsigned integers promoted by the values of this row */
        unsigned long long bits;
        PyObject *limits = layout->promotions, *seen = layout->promoted_sql_types;
        if (!PyDict_Check(data) ||
            exceeding_bits(limits, data, &bits) < 0)
            goto fail;
        PyObject *key = PyLong_FromUnsignedLongLong(bits);
        sql_types = key ? PyDict_GetItemWithError(seen, key) : NULL;
        Py_XDECREF(key);
        if (!sql_types) goto fail; /* not seen yet: the encoder works it out */
    }
    if (!PyBytes_Check(sql_types)) goto fail;
    /* room for a message like the last one, so that the buffer seldom grows */
    if (out_grow(&o, canal_size_hint) < 0 ||
        out_put(&o, PyBytes_AS_STRING(prefix), PyBytes_GET_SIZE(prefix)) < 0 ||
        out_put(&o, text, 6) < 0)
        goto fail;
    if (out_literal(&o, "\",\"es\":") < 0 || out_u64(&o, commit_ts >> 18) < 0 ||
        out_literal(&o, ",\"ts\":") < 0 || out_u64(&o, (unsigned long long)ts_ms) < 0 ||
        out_literal(&o, ",\"sql\":\"\",\"sqlType\":") < 0 ||
        out_put(&o, PyBytes_AS_STRING(sql_types), PyBytes_GET_SIZE(sql_types)) < 0 ||
        out_literal(&o, ",\"mysqlType\":") < 0 ||
        out_put(&o, PyBytes_AS_STRING(mysql_types), PyBytes_GET_SIZE(mysql_types)) < 0 ||
        out_literal(&o, ",\"old\":") < 0)
        goto fail;
    if (text[0] == 'U') { /* data first, so that old copies the texts they share */
        if (!PyTuple_Check(columns)) goto fail;
        Py_ssize_t count = PyTuple_GET_SIZE(columns);
        spans = PyMem_Malloc((sizeof(Py_ssize_t) * 2 + sizeof(PyObject *)) * (count ? count : 1));
        if (!spans) goto fail;
        Spans written = {&d, spans, spans + count, (PyObject **)(spans + 2 * count)};
        if (out_text_object(&d, columns, after, &written, NULL) < 0 || out_literal(&o, "[") < 0 ||
            out_text_object(&o, columns, before, NULL, &written) < 0 || out_literal(&o, "]") < 0)
            goto fail;
        if (out_literal(&o, ",\"data\":[") < 0 || out_put(&o, d.p, d.len) < 0) goto fail;
    } else if (out_literal(&o, "null,\"data\":[") < 0 ||
               out_text_object(&o, columns, data, NULL, NULL) < 0) {
        goto fail;
    }
    if (out_literal(&o, "]") < 0) goto fail;
    if (with_tidb && (out_literal(&o, ",\"_tidb\":{\"commitTs\":") < 0 ||
                      out_u64(&o, commit_ts) < 0 || out_literal(&o, "}") < 0))
        goto fail;
    if (out_literal(&o, "}") < 0) goto fail;
    canal_size_hint = o.len < 65536 ? o.len + 64 : 65536;
    Py_DECREF(kind), Py_DECREF(before), Py_DECREF(after), Py_DECREF(ts);
    PyMem_Free(d.p), PyMem_Free(spans);
    return out_bytes(&o);
fail:
    Py_XDECREF(kind), Py_XDECREF(before), Py_XDECREF(after), Py_XDECREF(ts);
    PyMem_Free(o.p), PyMem_Free(d.p), PyMem_Free(spans);
    return defer();
}

/* canal_rows(layout_of, rows, now_ms, with_tidb) -> list of (bytes | None) | None
     layout_of: schema -> its CanalLayout (called when a row's schema differs from the last
                one's)
     rows:      a list of RowChange (read from a snapshot taken on entry)
   canal_message for each row, None where the encoder must write the row; None for all of them
   when now_ms is not a C long. */
static PyObject *str_schema;

static PyObject *canal_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4 || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "canal_rows(layout_of, rows, now_ms, with_tidb)");
        return NULL;
    }
    PyObject *layout_of = args[0];
    long long ts_ms = args[2] == Py_None ? now_ms() : PyLong_AsLongLong(args[2]);
    if (ts_ms == -1 && PyErr_Occurred()) return defer(); /* a clock's odd value */
    int with_tidb = PyObject_IsTrue(args[3]);
    if (with_tidb < 0) return defer();
    /* a snapshot: Python code run from here (layout_of, formatters) cannot pull rows away */
    PyObject *rows = PyList_AsTuple(args[1]);
    if (!rows) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(rows);
    PyObject *out = PyList_New(count), *last_schema = NULL;
    Layout layout = {0};
    int have_layout = 0;
    if (!out) {
        Py_DECREF(rows);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *row = PyTuple_GET_ITEM(rows, i), *message;
        PyObject *schema = PyObject_GetAttr(row, str_schema);
        if (!schema) {
            message = defer();
        } else {
            if (schema != last_schema) { /* a run of one table's rows asks once */
                PyObject *obj = PyObject_CallOneArg(layout_of, schema);
                have_layout = obj && layout_read(obj, &layout);
                Py_XDECREF(obj);
                Py_XSETREF(last_schema, schema);
                schema = NULL;
            } else {
                Py_DECREF(schema);
            }
            message = have_layout ? canal_message(&layout, row, ts_ms, with_tidb) : defer();
        }
        if (!message) goto fail;
        PyList_SET_ITEM(out, i, message);
    }
    Py_XDECREF(last_schema), layout_clear(&layout);
    Py_DECREF(rows);
    return out;
fail:
    Py_XDECREF(last_schema), layout_clear(&layout);
    Py_DECREF(rows), Py_DECREF(out);
    return NULL;
}

/* column_object(columns, image) -> bytes | None
     columns: tuple of (the JSON up to the value, name, kind, fsp, encoder), sorted by name:
              '"name":{"t":1,"h":true,"f":11,"v":' already as Go writes it
     image:   column name -> canonical value; absent columns are left out
   Open Protocol's {"name":{"t":..,"f":..,"v":value},...} object.  The kinds as JSON values:
     K_INT        an int (64-bit) as a number, a bool, or a str kept
     K_BASE64     bytes as base64;  K_BASE64_TEXT: a str's UTF-8 as base64
     K_GO_QUOTED  bytes as Go's strconv.Quote text (printable ASCII as is, else the encoder)
     K_FLOAT32, K_DOUBLE  a finite float as Go's encoding/json writes it
     other kinds  the text out_formatted writes, as a string */
static int printable_ascii(const char *s, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\') return 0;
    return 1;
}

static int out_json_value(Out *o, int kind, int fsp, PyObject *v, PyObject *encoder) {
    int n;
    switch (kind) {
    case K_INT:
        if (PyBool_Check(v)) return v == Py_True ? out_literal(o, "true") : out_literal(o, "false");
        if (PyUnicode_CheckExact(v)) return out_json_str(o, v);
        if (!PyLong_CheckExact(v)) return -1;
        return out_int(o, v, 0);
    case K_BASE64:
        if (!PyBytes_CheckExact(v)) return -1;
        return out_base64(o, (const unsigned char *)PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
    case K_BASE64_TEXT: {
        if (!PyUnicode_CheckExact(v)) return -1;
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(v, &size);
        return utf8 ? out_base64(o, (const unsigned char *)utf8, size) : -1;
    }
    case K_GO_QUOTED: {
        if (!PyBytes_CheckExact(v)) return -1;
        if (printable_ascii(PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)))
            return out_json_utf8(o, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v));
        Out quoted = {NULL, 0, 0};
        int r = out_go_quoted(&quoted, (const unsigned char *)PyBytes_AS_STRING(v),
                              PyBytes_GET_SIZE(v));
        if (r == 0) r = out_json_utf8(o, quoted.p ? quoted.p : "", quoted.len);
        PyMem_Free(quoted.p);
        return r;
    }
    case K_FLOAT32:
    case K_DOUBLE: {
        if (!PyFloat_CheckExact(v)) return -1;
        double d = PyFloat_AS_DOUBLE(v), m = fabs(d);
        int bits = kind == K_FLOAT32 ? 32 : 64;
        if (!isfinite(d) || (bits == 32 && m > FLT_MAX)) return -1;
        if (m == 0 || (m >= 1e-6 && m < 1e21)) { /* the 'f' form */
            char buf[800];
            n = float_chars(d, bits, buf);
            return n < 0 ? -1 : out_put(o, buf, n);
        }
        /* the 'e' form, with Go's exponent: at least two digits, but e-7 not e-07 */
        char digits[40], text[64];
        int exponent, count = shortest_digits(m, bits, digits, &exponent);
        if (count < 0) return -1;
        n = 0;
        if (d < 0) text[n++] = '-';
        text[n++] = digits[0];
        if (count > 1) {
            text[n++] = '.';
            memcpy(text + n, digits + 1, count - 1), n += count - 1;
        }
        n += snprintf(text + n, sizeof text - n, exponent < 0 ? "e-%d" : "e+%02d", abs(exponent));
        return out_put(o, text, n);
    }
    default:
        break;
    }
    return out_formatted(o, kind, fsp, v, encoder);
}

static PyObject *column_object(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "column_object(columns, image)");
        return NULL;
    }
    PyObject *columns = args[0], *stack[GATHER_STACK], **values = gather(columns, args[1], stack);
    if (!values) return defer();
    Out o = {NULL, 0, 0};
    int first = 1;
    unsigned long calls = python_calls;
    if (out_literal(&o, "{") < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(columns); i++) {
        PyObject *spec = PyTuple_GET_ITEM(columns, i), *value = values[i];
        if (!value) continue;
        PyObject *head = PyTuple_GET_ITEM(spec, 0);
        if ((!first && out_literal(&o, ",") < 0) ||
            out_put(&o, PyBytes_AS_STRING(head), PyBytes_GET_SIZE(head)) < 0)
            goto fail;
        first = 0;
        int kind, fsp, failed;
        if (value == Py_None)
            failed = out_literal(&o, "null") < 0;
        else
            failed = spec_int(PyTuple_GET_ITEM(spec, 2), 0, KIND_MAX, &kind) < 0 ||
                     spec_int(PyTuple_GET_ITEM(spec, 3), -1, 6, &fsp) < 0 ||
                     out_json_value(&o, kind, fsp, value, PyTuple_GET_ITEM(spec, 4)) < 0;
        if (failed || out_literal(&o, "}") < 0) goto fail;
        if (calls != python_calls) { /* Python code ran: see out_text_object */
            if (!unchanged(columns, args[1], values)) goto fail;
            calls = python_calls;
        }
    }
    if (out_literal(&o, "}") < 0) goto fail;
    release(values, stack);
    return out_bytes(&o);
fail:
    release(values, stack);
    PyMem_Free(o.p);
    return defer();
}

/* ---- fractional-second digits -------------------------------------------------------------

   first_fsps(names, images, field) -> tuple of int | None
     For each name, the digits after the last "." of the first image's str value (0 without a
     dot), or -1 when no image has a str there.  images: a tuple of dicts or None (another
     mapping: None, and common.TemporalFsp reads them); field: None, or the key inside column
     objects holding the value (Open Protocol's "v"). */
static PyObject *first_fsps(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "first_fsps(names, images, field)");
        return NULL;
    }
    PyObject *names = args[0], *images = args[1], *field = args[2];
    Py_ssize_t count = PyTuple_GET_SIZE(names), nimages = PyTuple_GET_SIZE(images);
    PyObject *out = PyTuple_New(count);
    if (!out) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t fsp = -1;
        for (Py_ssize_t j = 0; j < nimages && fsp < 0; j++) {
            PyObject *image = PyTuple_GET_ITEM(images, j);
            if (image == Py_None) continue;
            if (!PyDict_Check(image)) {
                Py_DECREF(out);
                Py_RETURN_NONE;
            }
            PyObject *text = PyDict_GetItemWithError(image, PyTuple_GET_ITEM(names, i));
            if (text && field != Py_None && PyDict_Check(text)) /* a column object */
                text = PyDict_GetItemWithError(text, field);
            if (!text) {
                if (PyErr_Occurred()) goto fail;
                continue;
            }
            if (!PyUnicode_Check(text)) continue;
            Py_ssize_t len = PyUnicode_GET_LENGTH(text);
            Py_ssize_t dot = PyUnicode_FindChar(text, '.', 0, len, -1);
            if (dot == -2) goto fail;
            fsp = dot >= 0 ? len - dot - 1 : 0;
        }
        PyObject *value = PyLong_FromSsize_t(fsp);
        if (!value) goto fail;
        PyTuple_SET_ITEM(out, i, value);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

static PyMethodDef methods[] = {
    {"text_image", (PyCFunction)(void (*)(void))text_image, METH_FASTCALL,
     "A Canal-JSON row's canonical values, or None to use the Python loop."},
    {"column_image", (PyCFunction)(void (*)(void))column_image, METH_FASTCALL,
     "An Open Protocol row's values, or None to use the Python loop."},
    {"text_object", (PyCFunction)(void (*)(void))text_object, METH_FASTCALL,
     "A row image as Canal-JSON's {\"name\":\"text\"} object, or None to use Python."},
    {"column_object", (PyCFunction)(void (*)(void))column_object, METH_FASTCALL,
     "A row image as Open Protocol's column objects, or None to use Python."},
    {"exceeding", (PyCFunction)(void (*)(void))exceeding, METH_FASTCALL,
     "A bit per (name, largest) limit the image's int value is above."},
    {"canal_rows", (PyCFunction)(void (*)(void))canal_rows, METH_FASTCALL,
     "Canal-JSON row messages for a list of rows, None where Python must write one."},
    {"first_fsps", (PyCFunction)(void (*)(void))first_fsps, METH_FASTCALL,
     "Per name, the fractional-second digits of the first image's text, or -1."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_values",
                                    "The codecs' per-column loops, compiled.", -1, methods,
                                    NULL, NULL, NULL, NULL};

/* d[name] = value; -1 with an exception. */
static int add_int(PyObject *d, const char *name, long value) {
    PyObject *v = PyLong_FromLong(value);
    int r = v ? PyDict_SetItemString(d, name, v) : -1;
    Py_XDECREF(v);
    return r;
}

PyMODINIT_FUNC PyInit__values(void) {
    const char *alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int c = 0; c < 0x20; c++) JSON_SPECIAL[c] = 1;
    JSON_SPECIAL['"'] = JSON_SPECIAL['\\'] = JSON_SPECIAL['<'] = JSON_SPECIAL['>'] = 1;
    JSON_SPECIAL['&'] = JSON_SPECIAL[0xE2] = 1;
    memset(B64, -1, sizeof B64);
    for (int i = 0; i < 64; i++) B64[(unsigned char)alphabet[i]] = (signed char)i;
    PyDateTime_IMPORT;
    if (!PyDateTimeAPI) return NULL;
    PyObject *decimal = PyImport_ImportModule("decimal");
    if (!decimal) return NULL;
    DecimalType = PyObject_GetAttrString(decimal, "Decimal");
    Py_DECREF(decimal);
    if (!DecimalType) return NULL;
    str_t = PyUnicode_InternFromString("t");
    str_f = PyUnicode_InternFromString("f");
    str_h = PyUnicode_InternFromString("h");
    str_v = PyUnicode_InternFromString("v");
    str_f_format = PyUnicode_InternFromString("f");
    str_kind = PyUnicode_InternFromString("kind");
    str_before = PyUnicode_InternFromString("before");
    str_after = PyUnicode_InternFromString("after");
    str_commit_ts = PyUnicode_InternFromString("commit_ts");
    str_schema = PyUnicode_InternFromString("schema");
    for (size_t i = 0; i < LAYOUT_COUNT; i++)
        if (!(layout_names[i] = PyUnicode_InternFromString(LAYOUT_ATTRS[i].name))) return NULL;
    if (!str_t || !str_f || !str_h || !str_v || !str_f_format || !str_kind || !str_before ||
        !str_after || !str_commit_ts || !str_schema)
        return NULL;
    PyObject *m = PyModule_Create(&module), *kinds = PyDict_New();
    if (!m || !kinds) goto fail;
#define ADD_KIND(name)                                                                        \
    if (add_int(kinds, #name, K_##name) < 0) goto fail;
    KIND_NAMES(ADD_KIND)
#undef ADD_KIND
    if (PyModule_AddObject(m, "KINDS", kinds) < 0) goto fail; /* steals kinds on success */
    return m;
fail:
    Py_XDECREF(m), Py_XDECREF(kinds);
    return NULL;
}
