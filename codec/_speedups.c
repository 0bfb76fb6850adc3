/* The codec's hot functions in C: the compiled fast path of trio-remoting.
 *
 * Each function here is a fast path of a Python function that stays the specification:
 *
 *   new_command           codec/_command.py        new_command
 *   decode_json_header    codec/_header_json.py    decode_json_header
 *   encode_json_header    codec/_header_json.py    encode_json_header
 *   decode_binary_header  codec/_header_binary.py  decode_binary_header
 *   encode_binary_header  codec/_header_binary.py  encode_binary_header
 *   encode_frame_parts    codec/_encoder.py        encode_frame_parts
 *   next_command          codec/_decoder.py        FrameDecoder.next_command
 *
 * Theory of operation: a fast path handles only what the common case looks like (exact types,
 * values in range, strings that need no escaping, JSON in the shape fastjson and we write) and
 * returns exactly what the Python function returns for it. Anything else, every error
 * included, is handed to the Python function itself (bound at import by `bind_*`), so errors,
 * messages and rare inputs have one implementation. tests/codec/test_compiled_codec_agrees_
 * with_python.py holds the two to the same results with hypothesis.
 *
 * The command is built as the Python `new_command` builds it (`object.__new__` and its nine
 * slots set), writing the slots at the offsets their member descriptors give.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#ifndef SOURCE_SHA256
#define SOURCE_SHA256 ""
#endif

/* ------------------------------------------------------------------ bound state */

enum { F_CODE, F_LANGUAGE, F_VERSION, F_OPAQUE, F_FLAG, F_REMARK, F_EXT, F_BODY, F_ST, N_FIELDS };
static const char *const FIELD_NAMES[N_FIELDS] = {
    "code", "language", "version", "opaque", "flag", "remark", "ext_fields", "body",
    "serialize_type"};

static PyTypeObject *cmd_type = NULL;     /* RemotingCommand */
static Py_ssize_t offsets[N_FIELDS];
static PyObject *lang_by_name = NULL;     /* dict: "JAVA" -> LanguageCode.JAVA */
static PyObject *lang_by_value = NULL;    /* dict: 0 -> LanguageCode.JAVA */
static PyObject *lang_names = NULL;       /* dict: LanguageCode | None -> name | None */
static PyObject *lang_byte = NULL;        /* dict: LanguageCode -> int */
static PyObject *st_json = NULL;          /* SerializeType.JSON */
static PyObject *st_rocketmq = NULL;      /* SerializeType.ROCKETMQ */
/* the Python functions: the specification, and where every other case goes */
static PyObject *py_decode_json = NULL, *py_encode_json = NULL, *py_decode_binary = NULL,
                *py_encode_binary = NULL, *py_encode_frame_parts = NULL;
static Py_ssize_t large_body_bytes = 64 * 1024;

#define SLOT(obj, f) (*(PyObject **)((char *)(obj) + offsets[f]))

/* ------------------------------------------------------------------ building a command */

/* A new command with its nine fields (references stolen; NULL ones fail it). */
static PyObject *
make_command(PyObject *fields[N_FIELDS])
{
    PyObject *cmd = NULL;
    int i;
    for (i = 0; i < N_FIELDS; i++)
        if (fields[i] == NULL)
            goto fail;
    cmd = cmd_type->tp_alloc(cmd_type, 0);
    if (cmd == NULL)
        goto fail;
    for (i = 0; i < N_FIELDS; i++)
        SLOT(cmd, i) = fields[i];
    return cmd;
fail:
    for (i = 0; i < N_FIELDS; i++)
        Py_XDECREF(fields[i]);
    return NULL;
}

static PyObject *
sp_new_command(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *fields[N_FIELDS] = {NULL};
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), i;
    int j;
    if (cmd_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "codec._speedups is not bound");
        return NULL;
    }
    if (nargs > N_FIELDS) {
        PyErr_Format(PyExc_TypeError, "new_command() takes %d arguments (%zd given)",
                     N_FIELDS, nargs);
        return NULL;
    }
    for (i = 0; i < nargs; i++)
        fields[i] = args[i];
    for (i = 0; i < nkw; i++) { /* keywords: the Python function's parameter names */
        PyObject *name = PyTuple_GET_ITEM(kwnames, i);
        for (j = 0; j < N_FIELDS; j++)
            if (PyUnicode_CompareWithASCIIString(name, FIELD_NAMES[j]) == 0)
                break;
        if (j == N_FIELDS || fields[j] != NULL) {
            PyErr_Format(PyExc_TypeError, "new_command() got an unexpected or repeated "
                         "argument %R", name);
            return NULL;
        }
        fields[j] = args[nargs + i];
    }
    for (j = 0; j < N_FIELDS; j++) {
        if (fields[j] == NULL) {
            PyErr_Format(PyExc_TypeError, "new_command() missing argument '%s'",
                         FIELD_NAMES[j]);
            return NULL;
        }
    }
    for (j = 0; j < N_FIELDS; j++)
        Py_INCREF(fields[j]);
    return make_command(fields);
}

/* ------------------------------------------------------------------ fallbacks */

static PyObject *
call_python(PyObject *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "codec._speedups is not bound");
        return NULL;
    }
    return PyObject_Vectorcall(fn, args, nargs, kwnames);
}

/* ------------------------------------------------------------------ JSON: decoding */

typedef struct {
    const char *p;
    const char *end;
} Cursor;

#define FALLBACK 1  /* not the fast path's shape: the Python function decides */
#define FAILED -1   /* a Python error is set (memory) */

static inline void
skip_ws(Cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t'))
        c->p++;
}

/* A string without escapes or control characters: its bytes (quotes excluded). */
static inline int
scan_string(Cursor *c, const char **start, Py_ssize_t *len)
{
    const char *p = c->p;
    if (p >= c->end || *p != '"')
        return FALLBACK;
    p++;
    *start = p;
    while (p < c->end) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            *len = p - *start;
            c->p = p + 1;
            return 0;
        }
        if (ch == '\\' || ch < 0x20)
            return FALLBACK;
        p++;
    }
    return FALLBACK;
}

/* A str from UTF-8 bytes; FALLBACK (no error set) when they are not valid UTF-8. */
static inline int
make_str(const char *start, Py_ssize_t len, PyObject **out)
{
    PyObject *s = PyUnicode_DecodeUTF8(start, len, "strict");
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear();
            return FALLBACK;
        }
        return FAILED;
    }
    *out = s;
    return 0;
}

/* A JSON integer (no fraction, no exponent, no leading zero, not "-0") within int32. */
static inline int
scan_int32(Cursor *c, long *value)
{
    const char *p = c->p;
    int negative = 0;
    long long v = 0;
    int digits = 0;
    if (p < c->end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= c->end || *p < '0' || *p > '9')
        return FALLBACK;
    if (*p == '0' && (negative || (p + 1 < c->end && p[1] >= '0' && p[1] <= '9')))
        return FALLBACK;
    while (p < c->end && *p >= '0' && *p <= '9') {
        v = v * 10 + (*p - '0');
        if (++digits > 10)
            return FALLBACK;
        p++;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return FALLBACK;
    if (negative)
        v = -v;
    if (v < -2147483648LL || v > 2147483647LL)
        return FALLBACK;
    *value = (long)v;
    c->p = p;
    return 0;
}

static inline int
scan_literal(Cursor *c, const char *word, Py_ssize_t n)
{
    if (c->end - c->p < n || memcmp(c->p, word, n) != 0)
        return FALLBACK;
    c->p += n;
    return 0;
}

/* The value of a key the header does not use: a string, an int, true, false or null. */
static int
skip_value(Cursor *c)
{
    const char *start;
    Py_ssize_t len;
    long ignored;
    if (c->p >= c->end)
        return FALLBACK;
    switch (*c->p) {
    case '"': {
        int r = scan_string(c, &start, &len);
        if (r)
            return r;
        /* orjson refuses invalid UTF-8 anywhere: so must we, to decide alike */
        PyObject *s;
        r = make_str(start, len, &s);
        if (r)
            return r;
        Py_DECREF(s);
        return 0;
    }
    case 't':
        return scan_literal(c, "true", 4);
    case 'f':
        return scan_literal(c, "false", 5);
    case 'n':
        return scan_literal(c, "null", 4);
    default:
        return scan_int32(c, &ignored);
    }
}

/* extFields: an object of string (or null) values, keys once each; or null. */
static int
scan_ext(Cursor *c, PyObject **out)
{
    PyObject *ext, *key = NULL, *value = NULL;
    const char *start;
    Py_ssize_t len;
    int r;
    if (scan_literal(c, "null", 4) == 0) {
        Py_INCREF(Py_None);
        *out = Py_None;
        return 0;
    }
    if (c->p >= c->end || *c->p != '{')
        return FALLBACK;
    c->p++;
    ext = PyDict_New();
    if (ext == NULL)
        return FAILED;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        *out = ext;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if ((r = scan_string(c, &start, &len)) || (r = make_str(start, len, &key)))
            goto done;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') {
            r = FALLBACK;
            goto done;
        }
        c->p++;
        skip_ws(c);
        if (scan_literal(c, "null", 4) == 0) {
            Py_INCREF(Py_None);
            value = Py_None;
        }
        else if ((r = scan_string(c, &start, &len)) || (r = make_str(start, len, &value))) {
            goto done;
        }
        {
            Py_ssize_t before = PyDict_GET_SIZE(ext);
            if (PyDict_SetItem(ext, key, value) < 0) {
                r = FAILED;
                goto done;
            }
            if (PyDict_GET_SIZE(ext) == before) { /* a key twice: the Python way decides */
                r = FALLBACK;
                goto done;
            }
        }
        Py_CLEAR(key);
        Py_CLEAR(value);
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            *out = ext;
            return 0;
        }
        r = FALLBACK;
        goto done;
    }
done:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_DECREF(ext);
    return r;
}

enum { K_CODE = 1, K_OPAQUE = 2, K_FLAG = 4, K_VERSION = 8, K_LANGUAGE = 16, K_REMARK = 32,
       K_EXT = 64, K_REQUIRED = 31 };

/* The fast path of decode_json_header: 0 with *out set, FALLBACK, or FAILED. */
static int
json_decode_fast(const char *data, Py_ssize_t size, PyObject *body, PyObject *st,
                 PyObject **out)
{
    Cursor c = {data, data + size};
    long code = 0, opaque = 0, flag = 0, version = 0;
    PyObject *language = NULL, *remark = NULL, *ext = NULL;
    const char *start, *lang_start = NULL;
    Py_ssize_t len, lang_len = 0;
    int seen = 0, r;

    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{')
        return FALLBACK;
    c.p++;
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}')
        return FALLBACK; /* no fields: Python's coercions */
    for (;;) {
        int key = 0;
        skip_ws(&c);
        if ((r = scan_string(&c, &start, &len)))
            goto done;
        skip_ws(&c);
        if (c.p >= c.end || *c.p != ':') {
            r = FALLBACK;
            goto done;
        }
        c.p++;
        skip_ws(&c);
#define IS(word) (len == (Py_ssize_t)sizeof(word) - 1 && memcmp(start, word, len) == 0)
        if (IS("code"))
            key = K_CODE;
        else if (IS("opaque"))
            key = K_OPAQUE;
        else if (IS("flag"))
            key = K_FLAG;
        else if (IS("version"))
            key = K_VERSION;
        else if (IS("language"))
            key = K_LANGUAGE;
        else if (IS("remark"))
            key = K_REMARK;
        else if (IS("extFields"))
            key = K_EXT;
#undef IS
        if (key & seen) { /* a key twice: the Python way decides */
            r = FALLBACK;
            goto done;
        }
        seen |= key;
        switch (key) {
        case K_CODE:
            r = scan_int32(&c, &code);
            break;
        case K_OPAQUE:
            r = scan_int32(&c, &opaque);
            break;
        case K_FLAG:
            r = scan_int32(&c, &flag);
            break;
        case K_VERSION:
            r = scan_int32(&c, &version);
            break;
        case K_LANGUAGE:
            r = scan_string(&c, &lang_start, &lang_len);
            break;
        case K_REMARK:
            if (scan_literal(&c, "null", 4) == 0) {
                r = 0;
                break;
            }
            r = scan_string(&c, &start, &len);
            if (r == 0)
                r = make_str(start, len, &remark);
            break;
        case K_EXT:
            r = scan_ext(&c, &ext);
            break;
        default: { /* a key the header does not use: orjson refuses one that is not UTF-8 */
            PyObject *name;
            if ((r = make_str(start, len, &name)))
                break;
            Py_DECREF(name);
            r = skip_value(&c);
        }
        }
        if (r)
            goto done;
        skip_ws(&c);
        if (c.p < c.end && *c.p == ',') {
            c.p++;
            continue;
        }
        if (c.p < c.end && *c.p == '}') {
            c.p++;
            break;
        }
        r = FALLBACK;
        goto done;
    }
    skip_ws(&c);
    if (c.p != c.end || (seen & K_REQUIRED) != K_REQUIRED) {
        r = FALLBACK;
        goto done;
    }
    {
        PyObject *name;
        if ((r = make_str(lang_start, lang_len, &name)))
            goto done;
        language = PyDict_GetItemWithError(lang_by_name, name); /* borrowed */
        Py_DECREF(name);
        if (language == NULL) {
            if (PyErr_Occurred()) {
                r = FAILED;
                goto done;
            }
            language = Py_None;
        }
        Py_INCREF(language);
    }
    {
        PyObject *fields[N_FIELDS] = {
            PyLong_FromLong(code), language, PyLong_FromLong(version),
            PyLong_FromLong(opaque), PyLong_FromLong(flag),
            remark != NULL ? remark : Py_NewRef(Py_None),
            ext != NULL ? ext : Py_NewRef(Py_None),
            Py_NewRef(body), Py_NewRef(st)};
        *out = make_command(fields);
        return *out == NULL ? FAILED : 0;
    }
done:
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return r;
}

static PyObject *
sp_decode_json_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out = NULL;
    if (nargs == 3 && PyBytes_CheckExact(args[0]) && cmd_type != NULL && lang_by_name != NULL) {
        int r = json_decode_fast(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
                                 args[1], args[2], &out);
        if (r == 0)
            return out;
        if (r == FAILED)
            return NULL;
    }
    return call_python(py_decode_json, args, nargs, NULL);
}

/* ------------------------------------------------------------------ writing */

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t cap;
    char small[512];
} Buf;

static void
buf_init(Buf *b)
{
    b->data = b->small;
    b->len = 0;
    b->cap = sizeof(b->small);
}

static void
buf_free(Buf *b)
{
    if (b->data != b->small)
        PyMem_Free(b->data);
}

static int
buf_reserve(Buf *b, Py_ssize_t more)
{
    Py_ssize_t need = b->len + more;
    char *data;
    if (need <= b->cap)
        return 0;
    Py_ssize_t cap = b->cap * 2 > need ? b->cap * 2 : need;
    if (b->data == b->small) {
        data = PyMem_Malloc(cap);
        if (data != NULL)
            memcpy(data, b->small, b->len);
    }
    else {
        data = PyMem_Realloc(b->data, cap);
    }
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int
buf_put(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    return 0;
}

#define PUT_LIT(b, s) buf_put((b), (s), (Py_ssize_t)sizeof(s) - 1)

/* v in decimal, as "%ld" writes it: by hand, since snprintf cost about 650 instructions a
 * number (4 numbers a JSON header: 5-7% of a pipelined request's instructions, callgrind). */
static inline int
buf_put_long(Buf *b, long v)
{
    char tmp[24];
    char *end = tmp + sizeof(tmp), *p = end;
    unsigned long u = v < 0 ? 0UL - (unsigned long)v : (unsigned long)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    return buf_put(b, p, (Py_ssize_t)(end - p));
}

/* An exact int within [lo, hi]: 0 and *v set, else FALLBACK. */
static inline int
exact_int(PyObject *o, long lo, long hi, long *v)
{
    int overflow;
    long x;
    if (o == NULL || !PyLong_CheckExact(o))
        return FALLBACK;
    x = PyLong_AsLongAndOverflow(o, &overflow);
    if (overflow || x < lo || x > hi)
        return FALLBACK;
    *v = x;
    return 0;
}

/* The UTF-8 of an exact str; FALLBACK (no error set) for anything else or a lone surrogate. */
static inline int
utf8_of(PyObject *o, const char **s, Py_ssize_t *n)
{
    if (o == NULL || !PyUnicode_CheckExact(o))
        return FALLBACK;
    *s = PyUnicode_AsUTF8AndSize(o, n);
    if (*s == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    return 0;
}

/* True if fastjson would write these UTF-8 bytes other than as they are (an escape). */
static inline int
needs_escape(const char *s, Py_ssize_t n)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    for (; p < end; p++) {
        unsigned char ch = *p;
        if (ch < 0x20 || ch == '"' || ch == '\\' || ch == 0x7f)
            return 1;
        if (ch == 0xc2 && p + 1 < end && p[1] >= 0x80 && p[1] <= 0x9f)
            return 1; /* U+0080..U+009F */
        if (ch == 0xe2 && p + 2 < end && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
            return 1; /* U+2028, U+2029 */
    }
    return 0;
}

static inline int
put_json_str(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_reserve(b, n + 2) < 0)
        return -1;
    b->data[b->len++] = '"';
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len++] = '"';
    return 0;
}

typedef struct {
    const char *key;
    Py_ssize_t key_len;
    const char *value;
    Py_ssize_t value_len;
} Entry;

static int
entry_cmp(const void *a, const void *b)
{
    const Entry *x = a, *y = b;
    Py_ssize_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c)
        return c;
    return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/* ext_fields' entries with a str value (None ones are left out, as fastjson does), or
 * FALLBACK for anything but a dict of exact str keys and str-or-None values. *entries is
 * PyMem-allocated when *count > 0. */
static int
ext_entries(PyObject *ext, Entry **entries, Py_ssize_t *count)
{
    Py_ssize_t pos = 0, n = 0;
    PyObject *k, *v;
    Entry *e;
    *entries = NULL;
    *count = 0;
    if (!PyDict_CheckExact(ext))
        return FALLBACK;
    if (PyDict_GET_SIZE(ext) == 0)
        return 0;
    e = PyMem_Malloc(sizeof(Entry) * PyDict_GET_SIZE(ext));
    if (e == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    while (PyDict_Next(ext, &pos, &k, &v)) {
        if (v == Py_None) {
            if (!PyUnicode_CheckExact(k))
                goto fallback;
            continue;
        }
        if (utf8_of(k, &e[n].key, &e[n].key_len) || utf8_of(v, &e[n].value, &e[n].value_len))
            goto fallback;
        n++;
    }
    *entries = e;
    *count = n;
    if (n == 0) {
        PyMem_Free(e);
        *entries = NULL;
    }
    return 0;
fallback:
    PyMem_Free(e);
    return FALLBACK;
}

/* ------------------------------------------------------------------ JSON: encoding */

/* The fast path of encode_json_header into b: 0, FALLBACK or FAILED. */
static int
json_encode_fast(PyObject *cmd, Buf *b)
{
    long code, opaque, flag, version;
    PyObject *language_name, *remark, *ext;
    const char *remark_s = NULL, *lang_s = NULL;
    Py_ssize_t remark_n = 0, lang_n = 0, count = 0, i;
    Entry *entries = NULL;
    int r;

    if (Py_TYPE(cmd) != cmd_type)
        return FALLBACK;
    if (exact_int(SLOT(cmd, F_CODE), -2147483648L, 2147483647L, &code)
        || exact_int(SLOT(cmd, F_OPAQUE), -2147483648L, 2147483647L, &opaque)
        || exact_int(SLOT(cmd, F_FLAG), -2147483648L, 2147483647L, &flag)
        || exact_int(SLOT(cmd, F_VERSION), -2147483648L, 2147483647L, &version))
        return FALLBACK;
    if (SLOT(cmd, F_LANGUAGE) == NULL)
        return FALLBACK;
    language_name = PyDict_GetItemWithError(lang_names, SLOT(cmd, F_LANGUAGE));
    if (language_name == NULL) {
        PyErr_Clear(); /* unknown or unhashable: the Python way raises */
        return FALLBACK;
    }
    if (language_name != Py_None && utf8_of(language_name, &lang_s, &lang_n))
        return FALLBACK;
    remark = SLOT(cmd, F_REMARK);
    ext = SLOT(cmd, F_EXT);
    if (remark == NULL || ext == NULL)
        return FALLBACK;
    if (remark != Py_None
        && (utf8_of(remark, &remark_s, &remark_n) || needs_escape(remark_s, remark_n)))
        return FALLBACK;
    if (ext != Py_None) {
        if ((r = ext_entries(ext, &entries, &count)))
            return r;
        for (i = 0; i < count; i++) {
            if (needs_escape(entries[i].key, entries[i].key_len)
                || needs_escape(entries[i].value, entries[i].value_len)) {
                PyMem_Free(entries);
                return FALLBACK;
            }
        }
        if (count > 1)
            qsort(entries, count, sizeof(Entry), entry_cmp);
        for (i = 1; i < count; i++) { /* equal UTF-8: cannot happen in a dict; be safe */
            if (entry_cmp(&entries[i - 1], &entries[i]) == 0) {
                PyMem_Free(entries);
                return FALLBACK;
            }
        }
    }
    /* keys sorted, as orjson's OPT_SORT_KEYS writes them */
    r = -1;
    if (PUT_LIT(b, "{\"code\":") < 0 || buf_put_long(b, code) < 0)
        goto done;
    if (ext != Py_None) {
        if (PUT_LIT(b, ",\"extFields\":{") < 0)
            goto done;
        for (i = 0; i < count; i++) {
            if ((i && PUT_LIT(b, ",") < 0)
                || put_json_str(b, entries[i].key, entries[i].key_len) < 0
                || PUT_LIT(b, ":") < 0
                || put_json_str(b, entries[i].value, entries[i].value_len) < 0)
                goto done;
        }
        if (PUT_LIT(b, "}") < 0)
            goto done;
    }
    if (PUT_LIT(b, ",\"flag\":") < 0 || buf_put_long(b, flag) < 0)
        goto done;
    if (lang_s != NULL
        && (PUT_LIT(b, ",\"language\":") < 0 || put_json_str(b, lang_s, lang_n) < 0))
        goto done;
    if (PUT_LIT(b, ",\"opaque\":") < 0 || buf_put_long(b, opaque) < 0)
        goto done;
    if (remark_s != NULL
        && (PUT_LIT(b, ",\"remark\":") < 0 || put_json_str(b, remark_s, remark_n) < 0))
        goto done;
    if (PUT_LIT(b, ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":") < 0
        || buf_put_long(b, version) < 0 || PUT_LIT(b, "}") < 0)
        goto done;
    r = 0;
done:
    PyMem_Free(entries);
    return r == 0 ? 0 : FAILED;
}

/* A header encoder: its fast path (bound, one argument) into a buffer, else the Python
 * function. */
static PyObject *
encode_header(int (*fast)(PyObject *, Buf *), int bound, PyObject *python,
              PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs == 1 && bound) {
        Buf b;
        int r;
        buf_init(&b);
        r = fast(args[0], &b);
        if (r == 0) {
            PyObject *out = PyBytes_FromStringAndSize(b.data, b.len);
            buf_free(&b);
            return out;
        }
        buf_free(&b);
        if (r == FAILED)
            return NULL;
    }
    return call_python(python, args, nargs, NULL);
}

static PyObject *
sp_encode_json_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_header(json_encode_fast, cmd_type != NULL && lang_names != NULL,
                         py_encode_json, args, nargs);
}

/* ------------------------------------------------------------------ ROCKETMQ: encoding */

static inline void
put_be16(char *p, long v)
{
    p[0] = (char)((v >> 8) & 0xff);
    p[1] = (char)(v & 0xff);
}

static inline void
put_be32(char *p, long v)
{
    unsigned long u = (unsigned long)v;
    p[0] = (char)((u >> 24) & 0xff);
    p[1] = (char)((u >> 16) & 0xff);
    p[2] = (char)((u >> 8) & 0xff);
    p[3] = (char)(u & 0xff);
}

/* The fast path of encode_binary_header into b: 0, FALLBACK or FAILED. */
static int
binary_encode_fast(PyObject *cmd, Buf *b)
{
    long code, opaque, flag, version, language;
    PyObject *lang_value, *remark, *ext;
    const char *remark_s = NULL;
    Py_ssize_t remark_n = 0, count = 0, i, ext_length = 0;
    Entry *entries = NULL;
    char fixed[21];
    int r;

    if (Py_TYPE(cmd) != cmd_type)
        return FALLBACK;
    if (exact_int(SLOT(cmd, F_CODE), -32768, 32767, &code)
        || exact_int(SLOT(cmd, F_VERSION), -32768, 32767, &version)
        || exact_int(SLOT(cmd, F_OPAQUE), -2147483648L, 2147483647L, &opaque)
        || exact_int(SLOT(cmd, F_FLAG), -2147483648L, 2147483647L, &flag))
        return FALLBACK;
    if (SLOT(cmd, F_LANGUAGE) == NULL)
        return FALLBACK;
    lang_value = PyDict_GetItemWithError(lang_byte, SLOT(cmd, F_LANGUAGE));
    if (lang_value == NULL) {
        PyErr_Clear();
        return FALLBACK;
    }
    if (exact_int(lang_value, 0, 255, &language))
        return FALLBACK;
    remark = SLOT(cmd, F_REMARK);
    ext = SLOT(cmd, F_EXT);
    if (remark == NULL || ext == NULL)
        return FALLBACK;
    if (remark != Py_None && utf8_of(remark, &remark_s, &remark_n))
        return FALLBACK;
    if (ext != Py_None) {
        if ((r = ext_entries(ext, &entries, &count)))
            return r;
        for (i = 0; i < count; i++) {
            if (entries[i].key_len > 0x7FFF) {
                PyMem_Free(entries);
                return FALLBACK;
            }
            ext_length += 6 + entries[i].key_len + entries[i].value_len;
        }
        if (ext_length > 0x7FFFFFFF) {
            PyMem_Free(entries);
            return FALLBACK;
        }
    }
    /* the entries in the dict's order, as Python iterates them */
    put_be16(fixed, code);
    fixed[2] = (char)language;
    put_be16(fixed + 3, version);
    put_be32(fixed + 5, opaque);
    put_be32(fixed + 9, flag);
    put_be32(fixed + 13, (long)remark_n);
    r = -1;
    if (buf_put(b, fixed, 17) < 0 || buf_put(b, remark_s, remark_n) < 0)
        goto done;
    put_be32(fixed, (long)ext_length);
    if (buf_put(b, fixed, 4) < 0)
        goto done;
    for (i = 0; i < count; i++) {
        put_be16(fixed, (long)entries[i].key_len);
        put_be32(fixed + 2, (long)entries[i].value_len);
        if (buf_put(b, fixed, 2) < 0 || buf_put(b, entries[i].key, entries[i].key_len) < 0
            || buf_put(b, fixed + 2, 4) < 0
            || buf_put(b, entries[i].value, entries[i].value_len) < 0)
            goto done;
    }
    r = 0;
done:
    PyMem_Free(entries);
    return r == 0 ? 0 : FAILED;
}

static PyObject *
sp_encode_binary_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    return encode_header(binary_encode_fast, cmd_type != NULL && lang_byte != NULL,
                         py_encode_binary, args, nargs);
}

/* ------------------------------------------------------------------ ROCKETMQ: decoding */

static inline long
get_be16(const unsigned char *p)
{
    return (long)(short)((p[0] << 8) | p[1]);
}

static inline long
get_be32(const unsigned char *p)
{
    return (long)(int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16)
                           | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

/* The fast path of decode_binary_header: 0 with *out set, FALLBACK, or FAILED. */
static int
binary_decode_fast(const unsigned char *h, Py_ssize_t size, PyObject *body, PyObject *st,
                   PyObject **out)
{
    PyObject *remark = NULL, *ext = NULL, *key = NULL, *value = NULL, *language;
    Py_ssize_t pos = 17, end;
    long n;
    int r = FALLBACK;
    if (size < 21)
        return FALLBACK;
    n = get_be32(h + 13);
    if (n) {
        if (n < 0 || pos + n + 4 > size)
            return FALLBACK;
        if ((r = make_str((const char *)h + pos, n, &remark)))
            return r;
        pos += n;
    }
    n = get_be32(h + pos);
    r = FALLBACK;
    if (n) {
        if (n < 0 || pos + 4 + n > size)
            goto fail;
        end = pos + 4 + n;
        pos += 4;
        ext = PyDict_New();
        if (ext == NULL) {
            r = FAILED;
            goto fail;
        }
        while (pos < end) {
            long kn, vn;
            Py_ssize_t key_end;
            r = FALLBACK;
            if (pos + 6 > end)
                goto fail;
            kn = get_be16(h + pos);
            key_end = pos + 2 + kn;
            if (kn < 0 || key_end + 4 > end)
                goto fail;
            if ((r = make_str((const char *)h + pos + 2, kn, &key)))
                goto fail;
            vn = get_be32(h + key_end);
            pos = key_end + 4 + vn;
            r = FALLBACK;
            if (vn < 0 || pos > end)
                goto fail;
            if (vn) {
                if ((r = make_str((const char *)h + key_end + 4, vn, &value)))
                    goto fail;
            }
            else {
                value = Py_NewRef(Py_None);
            }
            if (PyDict_SetItem(ext, key, value) < 0) {
                r = FAILED;
                goto fail;
            }
            Py_CLEAR(key);
            Py_CLEAR(value);
        }
    }
    {
        PyObject *lang_key = PyLong_FromLong(h[2]);
        if (lang_key == NULL) {
            r = FAILED;
            goto fail;
        }
        language = PyDict_GetItemWithError(lang_by_value, lang_key);
        Py_DECREF(lang_key);
        if (language == NULL) {
            if (PyErr_Occurred()) {
                r = FAILED;
                goto fail;
            }
            language = Py_None;
        }
    }
    {
        PyObject *fields[N_FIELDS] = {
            PyLong_FromLong(get_be16(h)), Py_NewRef(language), PyLong_FromLong(get_be16(h + 3)),
            PyLong_FromLong(get_be32(h + 5)), PyLong_FromLong(get_be32(h + 9)),
            remark != NULL ? remark : Py_NewRef(Py_None),
            ext != NULL ? ext : Py_NewRef(Py_None), Py_NewRef(body), Py_NewRef(st)};
        *out = make_command(fields);
        return *out == NULL ? FAILED : 0;
    }
fail:
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(remark);
    Py_XDECREF(ext);
    return r;
}

static PyObject *
sp_decode_binary_header(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *out = NULL;
    if (nargs == 3 && PyBytes_CheckExact(args[0]) && cmd_type != NULL && lang_by_value != NULL) {
        int r = binary_decode_fast((const unsigned char *)PyBytes_AS_STRING(args[0]),
                                   PyBytes_GET_SIZE(args[0]), args[1], args[2], &out);
        if (r == 0)
            return out;
        if (r == FAILED)
            return NULL;
    }
    return call_python(py_decode_binary, args, nargs, NULL);
}

/* ------------------------------------------------------------------ frames */

/* The fast path of encode_frame_parts: a JSON or ROCKETMQ command whose body is None or
 * bytes below large_body_bytes, within the limits, in one bytes object. */
static PyObject *
sp_encode_frame_parts(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                      PyObject *kwnames)
{
    long long limit = 0x7FFFFFFFLL + 4, header_limit = 0xFFFFFF;
    PyObject *cmd, *st, *body, *out;
    Py_ssize_t body_n = 0, length;
    Buf b;
    int r;
    char *p;

    if (kwnames != NULL || nargs < 1 || nargs > 3 || cmd_type == NULL || lang_names == NULL
        || lang_byte == NULL)
        goto python;
    cmd = args[0];
    if (Py_TYPE(cmd) != cmd_type)
        goto python;
    if (nargs > 1) {
        if (!PyLong_CheckExact(args[1]))
            goto python;
        limit = PyLong_AsLongLong(args[1]);
        if (limit == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto python;
        }
    }
    if (nargs > 2) {
        if (!PyLong_CheckExact(args[2]))
            goto python;
        header_limit = PyLong_AsLongLong(args[2]);
        if (header_limit == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto python;
        }
    }
    st = SLOT(cmd, F_ST);
    body = SLOT(cmd, F_BODY);
    if (body == NULL || (body != Py_None && !PyBytes_CheckExact(body)))
        goto python;
    if (body != Py_None) {
        body_n = PyBytes_GET_SIZE(body);
        if (body_n >= large_body_bytes)
            goto python;
    }
    buf_init(&b);
    if (buf_reserve(&b, 8) < 0)
        return NULL;
    b.len = 8; /* the prefix, written below */
    if (st == st_json)
        r = json_encode_fast(cmd, &b);
    else if (st == st_rocketmq)
        r = binary_encode_fast(cmd, &b);
    else
        r = FALLBACK;
    if (r) {
        buf_free(&b);
        if (r == FAILED)
            return NULL;
        goto python;
    }
    length = 4 + (b.len - 8) + body_n;
    if (b.len - 8 > 0xFFFFFF || length > 0x7FFFFFFF || length + 4 > limit
        || b.len - 8 > header_limit) {
        buf_free(&b); /* the Python way raises the error that says which */
        goto python;
    }
    out = PyBytes_FromStringAndSize(NULL, b.len + body_n);
    if (out == NULL) {
        buf_free(&b);
        return NULL;
    }
    p = PyBytes_AS_STRING(out);
    put_be32(b.data, (long)length);
    put_be32(b.data + 4, (long)(((st == st_rocketmq) << 24) | (b.len - 8)));
    memcpy(p, b.data, b.len);
    if (body_n)
        memcpy(p + b.len, PyBytes_AS_STRING(body), body_n);
    buf_free(&b);
    return out;
python:
    return call_python(py_encode_frame_parts, args, nargs, kwnames);
}

/* ------------------------------------------------------------------ the frame decoder */

/* FrameDecoder.next_command's fast path: a whole frame buffered in ``_buf`` (no memory from
 * get_buffer in use, no sticky error), its prefix valid; anything else goes to the Python
 * method. Its slots are read and written at their descriptors' offsets, as the command's. */
enum { D_BUF, D_POS, D_ERROR, D_REST, D_MAX_FRAME, D_MAX_HEADER, N_DECODER };
static const char *const DECODER_SLOTS[N_DECODER] = {
    "_buf", "_pos", "_error", "_rest", "max_frame_bytes", "max_header_bytes"};
static PyTypeObject *decoder_type = NULL;
static Py_ssize_t decoder_offsets[N_DECODER];
static PyObject *codec_error = NULL;
static PyObject *py_next_command = NULL;

#define DSLOT(obj, f) (*(PyObject **)((char *)(obj) + decoder_offsets[f]))

static inline void
set_dslot(PyObject *self, int f, PyObject *value) /* steals value */
{
    PyObject *old = DSLOT(self, f);
    DSLOT(self, f) = value;
    Py_XDECREF(old);
}

static PyObject *
decoder_next(PyObject *self, PyObject *unused)
{
    PyObject *buf, *header, *body, *out = NULL, *st;
    const char *data;
    Py_ssize_t size, pos, available, end, start;
    long long length, max_frame, max_header;
    unsigned long word, header_length;
    int r, overflow;

    if (decoder_type == NULL || !PyObject_TypeCheck(self, decoder_type) || cmd_type == NULL
        || lang_by_name == NULL || lang_by_value == NULL || py_decode_json == NULL
        || py_decode_binary == NULL)
        goto python;
    buf = DSLOT(self, D_BUF);
    if (buf == NULL || DSLOT(self, D_POS) == NULL || DSLOT(self, D_ERROR) != Py_None
        || DSLOT(self, D_REST) != Py_None || !PyLong_CheckExact(DSLOT(self, D_POS))
        || DSLOT(self, D_MAX_FRAME) == NULL || DSLOT(self, D_MAX_HEADER) == NULL
        || !PyLong_CheckExact(DSLOT(self, D_MAX_FRAME))
        || !PyLong_CheckExact(DSLOT(self, D_MAX_HEADER)))
        goto python;
    if (PyBytes_CheckExact(buf)) {
        data = PyBytes_AS_STRING(buf);
        size = PyBytes_GET_SIZE(buf);
    }
    else if (PyByteArray_CheckExact(buf)) {
        data = PyByteArray_AS_STRING(buf);
        size = PyByteArray_GET_SIZE(buf);
    }
    else {
        goto python;
    }
    pos = PyLong_AsSsize_t(DSLOT(self, D_POS));
    if (pos < 0 || pos > size) {
        PyErr_Clear();
        goto python;
    }
    available = size - pos;
    if (available < 4)
        Py_RETURN_NONE;
    if (available < 8) /* a length prefix alone: the Python method checks it */
        goto python;
    max_frame = PyLong_AsLongLongAndOverflow(DSLOT(self, D_MAX_FRAME), &overflow);
    if (overflow)
        goto python;
    max_header = PyLong_AsLongLongAndOverflow(DSLOT(self, D_MAX_HEADER), &overflow);
    if (overflow)
        goto python;
    length = get_be32((const unsigned char *)data + pos);
    word = (unsigned long)(uint32_t)get_be32((const unsigned char *)data + pos + 4);
    header_length = word & 0xFFFFFF;
    if (length < 4 || length + 4 > max_frame || (long long)header_length > length - 4
        || word >= 0x2000000 || (long long)header_length > max_header)
        goto python; /* it raises the error that says which */
    if (available < 4 + length)
        Py_RETURN_NONE;
    end = pos + 4 + (Py_ssize_t)length;
    start = pos + 8 + (Py_ssize_t)header_length;
    header = PyBytes_FromStringAndSize(data + pos + 8, (Py_ssize_t)header_length);
    if (header == NULL)
        return NULL;
    if (end > start) {
        body = PyBytes_FromStringAndSize(data + start, end - start);
        if (body == NULL) {
            Py_DECREF(header);
            return NULL;
        }
    }
    else {
        body = Py_NewRef(Py_None);
    }
    if (end == size) {
        PyObject *empty = PyBytes_FromStringAndSize(NULL, 0), *zero = PyLong_FromLong(0);
        if (empty == NULL || zero == NULL) {
            Py_XDECREF(empty);
            Py_XDECREF(zero);
            goto failed;
        }
        set_dslot(self, D_BUF, empty);
        set_dslot(self, D_POS, zero);
    }
    else {
        PyObject *next = PyLong_FromSsize_t(end);
        if (next == NULL)
            goto failed;
        set_dslot(self, D_POS, next);
    }
    if (word < 0x1000000) {
        st = st_json;
        r = json_decode_fast(PyBytes_AS_STRING(header), PyBytes_GET_SIZE(header), body, st,
                             &out);
    }
    else {
        st = st_rocketmq;
        r = binary_decode_fast((const unsigned char *)PyBytes_AS_STRING(header),
                               PyBytes_GET_SIZE(header), body, st, &out);
    }
    if (r == FALLBACK) {
        PyObject *args[3] = {header, body, st};
        out = call_python(word < 0x1000000 ? py_decode_json : py_decode_binary, args, 3, NULL);
        if (out == NULL && PyErr_ExceptionMatches(codec_error)) {
            /* sticky, as the Python method makes it: the stream's framing is lost */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (value != NULL) {
                if (tb != NULL)
                    PyException_SetTraceback(value, tb);
                set_dslot(self, D_ERROR, Py_NewRef(value));
            }
            PyErr_Restore(type, value, tb);
        }
    }
    Py_DECREF(header);
    Py_DECREF(body);
    return out;
failed:
    Py_DECREF(header);
    Py_DECREF(body);
    return NULL;
python:
    if (py_next_command == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "codec._speedups is not bound");
        return NULL;
    }
    return PyObject_CallOneArg(py_next_command, self);
}

static PyMethodDef decoder_next_def = {
    "next_command", decoder_next, METH_NOARGS,
    "Return the next complete command, or None if more bytes are needed (the compiled fast "
    "path of codec._decoder.FrameDecoder.next_command).\n\nRaises:\n    CodecError: the "
    "stream is not valid; the same error is raised again on every call."};

static PyObject *
sp_bind_decoder(PyObject *self, PyObject *args)
{
    PyObject *cls, *error, *python;
    int i;
    if (!PyArg_ParseTuple(args, "O!OO", &PyType_Type, &cls, &error, &python))
        return NULL;
    for (i = 0; i < N_DECODER; i++) {
        PyObject *d = PyObject_GetAttrString(cls, DECODER_SLOTS[i]);
        if (d == NULL)
            return NULL;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "FrameDecoder.%s is not a slot", DECODER_SLOTS[i]);
            return NULL;
        }
        decoder_offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    Py_XSETREF(decoder_type, (PyTypeObject *)Py_NewRef(cls));
    Py_XSETREF(codec_error, Py_NewRef(error));
    Py_XSETREF(py_next_command, Py_NewRef(python));
    Py_RETURN_NONE;
}

/* The fast path as a method of FrameDecoder (no Python frame in between). */
static PyObject *
sp_decoder_method(PyObject *self, PyObject *unused)
{
    if (decoder_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "call bind_decoder first");
        return NULL;
    }
    return PyDescr_NewMethod(decoder_type, &decoder_next_def);
}

/* The same, as a function of the decoder (for tests). */
static PyObject *
sp_next_command(PyObject *self, PyObject *decoder)
{
    return decoder_next(decoder, NULL);
}

/* ------------------------------------------------------------------ docstrings */

/* Each function here takes its Python twin's docstring and signature (codec/_native.py,
 * adopt_doc), so help(), inspect and the API reference show the specification: set_doc
 * points the function's PyMethodDef at a copy of the text, which this table keeps alive. */
#define N_DOCS 16
static struct {
    PyMethodDef *def;
    PyObject *text; /* bytes, UTF-8 */
} docs[N_DOCS];

static PyObject *
sp_set_doc(PyObject *self, PyObject *args)
{
    PyObject *fn, *text;
    PyMethodDef *def;
    int i;
    if (!PyArg_ParseTuple(args, "OU", &fn, &text))
        return NULL;
    if (PyCFunction_Check(fn) && PyCFunction_GET_SELF(fn) == self)
        def = ((PyCFunctionObject *)fn)->m_ml;
    else if (Py_IS_TYPE(fn, &PyMethodDescr_Type)
             && ((PyMethodDescrObject *)fn)->d_method == &decoder_next_def)
        def = &decoder_next_def;
    else {
        PyErr_SetString(PyExc_TypeError, "set_doc takes a function of codec._speedups");
        return NULL;
    }
    for (i = 0; i < N_DOCS && docs[i].def != NULL && docs[i].def != def; i++)
        ;
    if (i == N_DOCS) {
        PyErr_SetString(PyExc_RuntimeError, "set_doc: too many docstrings");
        return NULL;
    }
    text = PyUnicode_AsUTF8String(text);
    if (text == NULL)
        return NULL;
    def->ml_doc = PyBytes_AS_STRING(text);
    docs[i].def = def;
    Py_XSETREF(docs[i].text, text);
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ binding */

static int
bind_command(PyObject *cls)
{
    int i;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "RemotingCommand must be a class");
        return -1;
    }
    for (i = 0; i < N_FIELDS; i++) {
        PyObject *d = PyObject_GetAttrString(cls, FIELD_NAMES[i]);
        if (d == NULL)
            return -1;
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            PyErr_Format(PyExc_TypeError, "RemotingCommand.%s is not a slot", FIELD_NAMES[i]);
            return -1;
        }
        offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    Py_XSETREF(cmd_type, (PyTypeObject *)Py_NewRef(cls));
    return 0;
}

/* bind_json and bind_binary: a serialization's Python decoder and encoder, its two language
 * tables and its SerializeType member. */
static PyObject *
bind_serialization(PyObject *args, PyObject **decode, PyObject **encode, PyObject **table,
                   PyObject **other_table, PyObject **member)
{
    PyObject *d, *e, *t, *o, *m;
    if (!PyArg_ParseTuple(args, "OOO!O!O", &d, &e, &PyDict_Type, &t, &PyDict_Type, &o, &m))
        return NULL;
    Py_XSETREF(*decode, Py_NewRef(d));
    Py_XSETREF(*encode, Py_NewRef(e));
    Py_XSETREF(*table, Py_NewRef(t));
    Py_XSETREF(*other_table, Py_NewRef(o));
    Py_XSETREF(*member, Py_NewRef(m));
    Py_RETURN_NONE;
}

static PyObject *
sp_bind_json(PyObject *self, PyObject *args)
{
    return bind_serialization(args, &py_decode_json, &py_encode_json, &lang_by_name,
                              &lang_names, &st_json);
}

static PyObject *
sp_bind_binary(PyObject *self, PyObject *args)
{
    return bind_serialization(args, &py_decode_binary, &py_encode_binary, &lang_by_value,
                              &lang_byte, &st_rocketmq);
}

static PyObject *
sp_bind_frames(PyObject *self, PyObject *args)
{
    PyObject *encode;
    Py_ssize_t large;
    if (!PyArg_ParseTuple(args, "On", &encode, &large))
        return NULL;
    Py_XSETREF(py_encode_frame_parts, Py_NewRef(encode));
    large_body_bytes = large;
    Py_RETURN_NONE;
}

static PyObject *
sp_bind_command(PyObject *self, PyObject *cls)
{
    if (bind_command(cls) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"bind_command", (PyCFunction)sp_bind_command, METH_O,
     "Bind RemotingCommand (its slots' offsets), for new_command."},
    {"bind_json", sp_bind_json, METH_VARARGS,
     "bind_json(decode, encode, language_by_name, language_names, SerializeType.JSON)."},
    {"bind_binary", sp_bind_binary, METH_VARARGS,
     "bind_binary(decode, encode, language_by_value, language_byte, SerializeType.ROCKETMQ)."},
    {"bind_decoder", sp_bind_decoder, METH_VARARGS,
     "bind_decoder(FrameDecoder, CodecError, FrameDecoder.next_command)."},
    {"decoder_method", sp_decoder_method, METH_NOARGS,
     "FrameDecoder.next_command's compiled fast path, as a method of FrameDecoder."},
    {"next_command", sp_next_command, METH_O,
     "next_command(decoder): the same fast path as a function."},
    {"set_doc", sp_set_doc, METH_VARARGS,
     "set_doc(function, text): the function's docstring and text signature."},
    {"bind_frames", sp_bind_frames, METH_VARARGS,
     "bind_frames(encode_frame_parts, large_body_bytes)."},
    {"new_command", (PyCFunction)(void (*)(void))sp_new_command,
     METH_FASTCALL | METH_KEYWORDS,
     "new_command($module, /, code, language, version, opaque, flag, remark, ext_fields, body,"
     " serialize_type)\n--\n\ncodec._command.new_command."},
    {"decode_json_header", (PyCFunction)(void (*)(void))sp_decode_json_header, METH_FASTCALL,
     "codec._header_json.decode_json_header."},
    {"encode_json_header", (PyCFunction)(void (*)(void))sp_encode_json_header, METH_FASTCALL,
     "codec._header_json.encode_json_header."},
    {"decode_binary_header", (PyCFunction)(void (*)(void))sp_decode_binary_header,
     METH_FASTCALL, "codec._header_binary.decode_binary_header."},
    {"encode_binary_header", (PyCFunction)(void (*)(void))sp_encode_binary_header,
     METH_FASTCALL, "codec._header_binary.encode_binary_header."},
    {"encode_frame_parts", (PyCFunction)(void (*)(void))sp_encode_frame_parts,
     METH_FASTCALL | METH_KEYWORDS, "codec._encoder.encode_frame_parts."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "codec._speedups",
    "The codec's hot functions in C (see codec/_speedups.c; codec/_native.py loads it).", -1,
    methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
