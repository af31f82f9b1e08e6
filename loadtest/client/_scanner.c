/* The per-read scanner: the client's hot path in C, with loadtest/client/decode.py as its definition.

   Two things, both optional (loadtest/client/scanner.py loads this module if it was built, and
   the pure-Python path does the same work when it was not, or when LOADTEST_SCANNER=python):

   - recv_stamped(fd, size): one recvmsg(2) and the kernel's arrival stamp of its newest bytes
     (SO_TIMESTAMPING, software receive, wall clock), as (bytes, seconds or None). What the
     reactor did with socket.recvmsg and struct, without a list of tuples per read.
   - Scanner(decoder).feed(data, now): StreamDecoder.feed for a read of whole SSE events, each
     one "data: " line, taking the usual chat/completions content chunk (StreamDecoder._plain's
     definition, exactly) without building its JSON objects. Anything else -- a read that ends
     mid-event, a named event, the finish chunk, usage details, an error, odd JSON -- goes to
     the decoder's Python methods, with nothing changed yet. So a chunk this module takes gives
     the very record the Python path gives, and every other chunk is the Python path's.

   The rule that keeps the records identical: this code may decline any chunk (the Python path
   then does it), but it may take a chunk only when orjson would parse it and _plain would take
   it. The JSON check below is therefore strict (the JSON grammar, UTF-8, surrogate escapes) and
   declines whatever it is not sure about (a key with an escape, a repeated key that matters,
   a number too long for 64 bits, deep nesting). tests/unit/test_scanner.py fuzzes both paths.

   - Scanner.read() over TLS (attach()'s tls): the connection's OpenSSL object's own read, called
     from here as tls_read.read_tls calls it from Python (the same records, the same ends), then
     the same parse as a plain read; no kernel stamp (SSL_read reads the socket itself).
   - Scanner.frame(): the read's chunked framing taken off here, not by geventhttpclient's parser,
     where the read is whole chunks (see "chunked framing" below); the parser does every other read.
   - run_turns() (Linux): the reactor's loop, its epoll waits and their batches' reads, in C.

   The GIL is kept during recvmsg: the socket is non-blocking (the call takes a few µs), and
   releasing it would invite the hub's thread in between the stamp and the parse. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#ifndef SO_TIMESTAMPING
#define SO_TIMESTAMPING 37
#endif

/* ---------------------------------------------------------------- recvmsg with its stamp */

#define READ_SIZE 65536 /* the reactor's _READ_SIZE */

/* The arrival stamp in a recvmsg's control data (arrival.arrival_time), or NAN when there is none. */
static double
arrival_stamp(struct msghdr *msg)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPING
            && c->cmsg_len >= CMSG_LEN(2 * sizeof(long long))) {
            long long stamp[2];
            memcpy(stamp, CMSG_DATA(c), sizeof stamp);
            if (stamp[0]) /* sec + nsec * 1e-9: the same float operations as arrival_time */
                return (double)stamp[0] + (double)stamp[1] * 1e-9;
            /* a zero stamp: look further, as arrival_time does */
        }
    }
    return NAN;
}

/* One recvmsg(2) into buf (retried on EINTR) and the arrival stamp (NAN when none): the byte count,
   or -1 with errno set. The reactor's reads and recv_stamped both read with it. */
static Py_ssize_t
recv_raw(int fd, int stamps, char *buf, Py_ssize_t size, double *arrived)
{
    union {
        char bytes[CMSG_SPACE(3 * sizeof(struct timespec))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, (size_t)size};
    struct msghdr msg;
    ssize_t n;
    for (;;) {
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (stamps) {
            msg.msg_control = control.bytes;
            msg.msg_controllen = sizeof control.bytes;
        }
        n = recvmsg(fd, &msg, 0);
        if (n >= 0 || errno != EINTR) break;
    }
    *arrived = NAN;
    if (n > 0 && stamps) *arrived = arrival_stamp(&msg);
    return n;
}

static PyObject *
stamp_object(double arrived)
{
    if (isnan(arrived)) Py_RETURN_NONE;
    return PyFloat_FromDouble(arrived);
}

static PyObject *
recv_stamped(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "recv_stamped(fd, size)");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if (PyErr_Occurred())
        return NULL;
    PyObject *data = PyBytes_FromStringAndSize(NULL, size);
    if (data == NULL) return NULL;
    double stamp;
    Py_ssize_t n = recv_raw(fd, 1, PyBytes_AS_STRING(data), size, &stamp);
    if (n < 0) {
        int saved = errno;
        Py_DECREF(data);
        errno = saved;
        return PyErr_SetFromErrno(PyExc_OSError); /* EAGAIN becomes BlockingIOError, as socket.recvmsg's */
    }
    if (n != size && _PyBytes_Resize(&data, n) < 0) return NULL;
    PyObject *arrived = stamp_object(stamp);
    if (arrived == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, data, arrived);
    Py_DECREF(data);
    Py_DECREF(arrived);
    return out;
}

/* ---------------------------------------------------------------- a strict JSON check */

typedef const unsigned char *cur_t;

typedef struct {
    cur_t p, end;
    int depth;
} Json;

#define MAX_DEPTH 32
#define MAX_DIGITS 18 /* fits a signed 64-bit integer: longer numbers are declined */

static void
ws(Json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int
hex4(cur_t p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence starting at p (a byte >= 0x80), strictly (no overlongs, surrogates, > U+10FFFF). */
static int
utf8(Json *j)
{
    cur_t p = j->p;
    Py_ssize_t left = j->end - p;
    unsigned c = p[0];
    if (c >= 0xC2 && c <= 0xDF) {
        if (left < 2 || (p[1] & 0xC0) != 0x80) return 0;
        j->p += 2;
        return 1;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (c == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
        if (c == 0xED && p[1] >= 0xA0) return 0; /* a surrogate */
        j->p += 3;
        return 1;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (c == 0xF0 && p[1] < 0x90) return 0; /* overlong */
        if (c == 0xF4 && p[1] >= 0x90) return 0; /* past U+10FFFF */
        j->p += 4;
        return 1;
    }
    return 0;
}

/* A string (j->p at its opening quote). Its raw span in *s, *n; *escaped if it holds a backslash. */
static int
string(Json *j, cur_t *s, Py_ssize_t *n, int *escaped)
{
    j->p++;
    cur_t start = j->p;
    int esc = 0;
    while (j->p < j->end) {
        unsigned c = *j->p;
        if (c == '"') {
            *s = start;
            *n = j->p - start;
            *escaped = esc;
            j->p++;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c == '\\') {
            esc = 1;
            if (j->end - j->p < 2) return 0;
            unsigned e = j->p[1];
            if (e == 'u') {
                unsigned u, v;
                if (j->end - j->p < 6 || !hex4(j->p + 2, &u)) return 0;
                j->p += 6;
                if (u >= 0xDC00 && u <= 0xDFFF) return 0; /* a lone low surrogate */
                if (u >= 0xD800 && u <= 0xDBFF) {         /* must be a pair */
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &v)) return 0;
                    if (v < 0xDC00 || v > 0xDFFF) return 0;
                    j->p += 6;
                }
                continue;
            }
            if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' && e != 't')
                return 0;
            j->p += 2;
            continue;
        }
        if (c >= 0x80) {
            if (!utf8(j)) return 0;
            continue;
        }
        j->p++;
    }
    return 0;
}

/* A number. *is_int: no fraction or exponent; then *value holds it. */
static int
number(Json *j, int *is_int, long long *value)
{
    int neg = 0, digits = 0;
    long long v = 0;
    if (j->p < j->end && *j->p == '-') {
        neg = 1;
        j->p++;
    }
    if (j->p >= j->end) return 0;
    if (*j->p == '0') {
        j->p++;
        digits = 1;
    } else if (*j->p >= '1' && *j->p <= '9') {
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            if (++digits > MAX_DIGITS) return 0;
            v = v * 10 + (*j->p - '0');
            j->p++;
        }
    } else {
        return 0;
    }
    int integer = 1;
    if (j->p < j->end && *j->p == '.') {
        integer = 0;
        j->p++;
        int frac = 0;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            if (++frac > 64) return 0;
            j->p++;
        }
        if (!frac) return 0;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        integer = 0;
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
        int exp = 0;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
            if (++exp > 2) return 0; /* |exponent| < 100: a double, never an overflow */
            j->p++;
        }
        if (!exp) return 0;
    }
    *is_int = integer;
    *value = neg ? -v : v;
    return 1;
}

static int
literal(Json *j, const char *word, Py_ssize_t n)
{
    if (j->end - j->p < n || memcmp(j->p, word, n) != 0) return 0;
    j->p += n;
    return 1;
}

static int value(Json *j);

/* Walk an object's members, calling member(j, key, n, ctx) at each value (which must consume it).
   With a member function, keys with an escape are declined (they could spell a key that matters);
   without one (an object we do not look into), every member is checked, not kept. */
typedef int (*member_fn)(Json *j, cur_t key, Py_ssize_t n, void *ctx);
static int members(Json *j, member_fn member, void *ctx);

/* An array's items; the first one, when first is given, through first(j, ctx) (the choices list). */
static int items(Json *j, int (*first)(Json *j, void *ctx), void *ctx);

static int
value(Json *j)
{
    if (j->p >= j->end) return 0;
    switch (*j->p) {
    case '{': return members(j, NULL, NULL);
    case '[': return items(j, NULL, NULL);
    case '"': {
        cur_t s;
        Py_ssize_t n;
        int esc;
        return string(j, &s, &n, &esc);
    }
    case 't': return literal(j, "true", 4);
    case 'f': return literal(j, "false", 5);
    case 'n': return literal(j, "null", 4);
    default: {
        int is_int;
        long long v;
        return number(j, &is_int, &v);
    }
    }
}

static int
key_is(cur_t s, Py_ssize_t n, const char *word)
{
    return (Py_ssize_t)strlen(word) == n && memcmp(s, word, n) == 0;
}

/* At an opening bracket: 1 if items follow, 2 if it closes at once (consumed), 0 if it is not one. */
static int
open_bracket(Json *j, char open, char close)
{
    if (j->p >= j->end || *j->p != open || ++j->depth > MAX_DEPTH) return 0;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == close) {
        j->p++;
        j->depth--;
        return 2;
    }
    return 1;
}

/* After a member or an item: 1 if a comma follows (more to come), 2 at the closing bracket, else 0. */
static int
after_item(Json *j, char close)
{
    ws(j);
    if (j->p >= j->end) return 0;
    if (*j->p == ',') {
        j->p++;
        ws(j);
        return 1;
    }
    if (*j->p != close) return 0;
    j->p++;
    j->depth--;
    return 2;
}

static int
members(Json *j, member_fn member, void *ctx)
{
    int state = open_bracket(j, '{', '}');
    while (state == 1) {
        cur_t s;
        Py_ssize_t n;
        int esc;
        if (j->p >= j->end || *j->p != '"' || !string(j, &s, &n, &esc) || (esc && member)) return 0;
        ws(j);
        if (j->p >= j->end || *j->p != ':') return 0;
        j->p++;
        ws(j);
        if (!(member ? member(j, s, n, ctx) : value(j))) return 0;
        state = after_item(j, '}');
    }
    return state == 2;
}

static int
items(Json *j, int (*first)(Json *j, void *ctx), void *ctx)
{
    int state = open_bracket(j, '[', ']');
    if (state == 2 && first) return 0; /* an empty choices list: not the usual chunk */
    for (int k = 0; state == 1; k++) {
        if (!(first && k == 0 ? first(j, ctx) : value(j))) return 0;
        state = after_item(j, ']');
    }
    return state == 2;
}

/* What a usual content chunk tells the record (StreamDecoder._plain). */
typedef struct {
    int chat;
    int seen;                /* bits: which keys that matter were met (a repeat declines) */
    int content;             /* the text (delta.content or text) is a non-empty string */
    int usage;               /* usage is a non-empty object with an integer completion_tokens */
    int usage_members;
    int has_count, has_prompt;
    long long count, prompt;
} Chunk;

enum { S_CHOICES = 1, S_USAGE = 2, S_OBJECT = 4, S_FINISH = 8, S_DELTA = 16, S_TEXT = 32, S_CONTENT = 64,
       S_COUNT = 128, S_PROMPT = 256 };

static int
once(Chunk *c, int bit)
{
    if (c->seen & bit) return 0;
    c->seen |= bit;
    return 1;
}

static int
text_value(Json *j, Chunk *c)
{
    cur_t s;
    Py_ssize_t n;
    int esc;
    if (j->p >= j->end || *j->p != '"' || !string(j, &s, &n, &esc) || n == 0) return 0;
    c->content = 1;
    return 1;
}

static int
delta_member(Json *j, cur_t key, Py_ssize_t n, void *ctx)
{
    Chunk *c = ctx;
    if (key_is(key, n, "content")) return once(c, S_CONTENT) && text_value(j, c);
    return value(j);
}

static int
choice_member(Json *j, cur_t key, Py_ssize_t n, void *ctx)
{
    Chunk *c = ctx;
    if (key_is(key, n, "finish_reason")) return once(c, S_FINISH) && literal(j, "null", 4);
    if (c->chat && key_is(key, n, "delta")) return once(c, S_DELTA) && members(j, delta_member, c);
    if (!c->chat && key_is(key, n, "text")) return once(c, S_TEXT) && text_value(j, c);
    return value(j);
}

static int
usage_member(Json *j, cur_t key, Py_ssize_t n, void *ctx)
{
    Chunk *c = ctx;
    c->usage_members++;
    if (key_is(key, n, "completion_tokens_details") || key_is(key, n, "prompt_tokens_details")) return 0;
    if (key_is(key, n, "completion_tokens")) {
        int is_int;
        if (!once(c, S_COUNT) || j->p >= j->end || !number(j, &is_int, &c->count) || !is_int) return 0;
        c->has_count = 1;
        return 1;
    }
    if (key_is(key, n, "prompt_tokens")) {
        int is_int;
        if (!once(c, S_PROMPT)) return 0;
        if (j->p < j->end && *j->p == 'n') return literal(j, "null", 4);
        if (j->p >= j->end || *j->p == '-' || !number(j, &is_int, &c->prompt) || !is_int) return 0;
        c->has_prompt = 1;
        return 1;
    }
    return value(j);
}

/* The first choice: an object, read for what matters (the others are only checked). */
static int
first_choice(Json *j, void *ctx)
{
    return members(j, choice_member, ctx);
}

static int
top_member(Json *j, cur_t key, Py_ssize_t n, void *ctx)
{
    Chunk *c = ctx;
    if (key_is(key, n, "choices")) return once(c, S_CHOICES) && items(j, first_choice, c);
    if (key_is(key, n, "usage")) {
        if (!once(c, S_USAGE) || j->p >= j->end) return 0;
        if (*j->p == 'n') return literal(j, "null", 4);
        if (!members(j, usage_member, c)) return 0; /* anything but null or an object declines */
        if (c->usage_members) {
            if (!c->has_count) return 0;
            c->usage = 1;
        }
        return 1;
    }
    if (key_is(key, n, "object")) {
        if (!once(c, S_OBJECT) || j->p >= j->end) return 0;
        if (*j->p == '"') {
            cur_t s;
            Py_ssize_t len;
            int esc;
            if (!string(j, &s, &len, &esc) || esc || key_is(s, len, "error")) return 0;
            return 1;
        }
        return value(j);
    }
    if (key_is(key, n, "error") || key_is(key, n, "timings") || key_is(key, n, "mock_sent")) return 0;
    return value(j);
}

/* 1: the usual content chunk, its facts in *c; 0: not one (or not sure): the Python path decides. */
static int
usual_chunk(const char *data, Py_ssize_t len, int chat, Chunk *c)
{
    memset(c, 0, sizeof *c);
    c->chat = chat;
    if (len < 2 || data[0] != '{') return 0;
    Json j = {(cur_t)data, (cur_t)data + len, 0};
    if (!members(&j, top_member, c)) return 0;
    ws(&j);
    if (j.p != j.end) return 0;
    if (!(c->seen & S_CHOICES) || !c->content) return 0;
    if (c->usage && (c->count < INT_MIN || c->count > INT_MAX)) return 0; /* array("i") would refuse it */
    return 1;
}

/* ---------------------------------------------------------------- chunked framing, read here */

/* HTTP/1.1's chunked framing (RFC 9112, 7.1), strictly: a chunk's size in hex and CRLF, then its
   data and CRLF. Why this module reads it, when geventhttpclient's C parser strips it: that parser
   calls back into Python for every piece (an attribute looked up by its C name, an argument tuple,
   a call), which cost a paced read more than its decode. So the usual read -- whole chunks, from
   one chunk's start to another's -- is de-framed here and the parser is left where it was, between
   two chunks; any other read (a chunk cut by the read, an extension, the last chunk, trailers) goes
   to the parser as before, and this follows it. It starts at the head's end (the raw bytes the
   parser was fed with the head: _http.PiecedResponse) and checks, for every read the parser takes,
   that it took out of the framing exactly the bytes the parser handed over. At the first doubt (a
   difference, anything it does not read) it stops for the rest of the stream (FR_OFF), and the
   parser does it all: the records are the parser's either way. */

enum { FR_OFF, FR_SIZE, FR_SIZE_LF, FR_DATA, FR_DATA_CR, FR_DATA_LF };

typedef struct {
    int state;
    int digits;              /* FR_SIZE: the size's hex digits read so far (0: between two chunks) */
    unsigned long long left; /* FR_SIZE: the size so far; FR_DATA: the data still to come */
} Framing;

#define FR_MAX_DIGITS 15

static int
hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

#define AT_BOUNDARY(f) ((f).state == FR_SIZE && (f).digits == 0)

/* Follow the framing over buf[0:n], copying the chunks' data to out (room for n bytes) and its length
   to *outlen. 0 when all of it was read; -1 (the state then FR_OFF) where this stops: the last
   chunk (size 0), an extension, whitespace, a bare LF, a size too long. */
static int
deframe(Framing *f, const char *buf, Py_ssize_t n, char *out, Py_ssize_t *outlen)
{
    Py_ssize_t i = 0, o = 0;
    while (i < n) {
        char ch = buf[i];
        switch (f->state) {
        case FR_SIZE: {
            int v = hex_digit(ch);
            if (v >= 0 && f->digits < FR_MAX_DIGITS) {
                f->digits++;
                f->left = f->left * 16 + (unsigned)v;
            } else if (ch == '\r' && f->digits > 0 && f->left > 0) {
                f->state = FR_SIZE_LF;
            } else {
                goto off;
            }
            i++;
            break;
        }
        case FR_SIZE_LF:
            if (ch != '\n') goto off;
            f->state = FR_DATA;
            i++;
            break;
        case FR_DATA: {
            Py_ssize_t take = n - i;
            if ((unsigned long long)take > f->left) take = (Py_ssize_t)f->left;
            memcpy(out + o, buf + i, (size_t)take);
            o += take;
            i += take;
            f->left -= (unsigned long long)take;
            if (f->left == 0) f->state = FR_DATA_CR;
            break;
        }
        case FR_DATA_CR:
            if (ch != '\r') goto off;
            f->state = FR_DATA_LF;
            i++;
            break;
        case FR_DATA_LF:
            if (ch != '\n') goto off;
            f->state = FR_SIZE;
            f->digits = 0;
            f->left = 0;
            i++;
            break;
        default:
            goto off;
        }
    }
    *outlen = o;
    return 0;
off:
    f->state = FR_OFF;
    *outlen = o;
    return -1;
}

/* ---------------------------------------------------------------- the Scanner type */

typedef struct {
    PyObject_HEAD
    PyObject *decoder;
    PyObject *rec;
    PyObject *pieces_owner; /* the decoder's SSEParser: whole-event reads need it empty */
    PyObject *chunk_ms;
    PyObject *ms_append, *tokens_append, *usage_append;
    double start;
    int chat;
    int plain;              /* the decoder may take the usual chunk (chat or completions, no captured text) */
    /* attach(): the socket and the HTTP parser of the stream the reactor reads with read() */
    int fd;
    int stamps;             /* the kernel stamps this socket's arrivals (SO_TIMESTAMPING is on) */
    PyObject *parser_feed;  /* geventhttpclient's C HTTPResponseParser.feed (unbound) */
    PyObject *response;
    PyObject *pieces;       /* the list the parser appends de-chunked body pieces to */
    PyObject *parse_error;  /* HTTPParseError: bad framing, told apart from other failures */
    PyObject *tls_read;     /* over TLS: the OpenSSL object's read and pending (bound); else NULL */
    PyObject *tls_pending;
    Framing framing;        /* the chunked framing as this module follows it (FR_OFF: the parser alone) */
    Py_ssize_t deframed;    /* reads de-framed here, the parser not fed (the tests and benchmarks count them) */
    /* Content chunks the reactor's reads took and the record does not hold yet (see "held chunks"). */
    double *held_ms;
    int *held_usage;
    Py_ssize_t held, held_cap;
    long long last_usage, prompt; /* decoder.last_usage and rec.prompt_tokens to set, when *_due */
    int last_usage_due, prompt_due;
    int sse_empty;          /* the SSE parser is known to hold nothing (nothing but this module read since) */
    /* The content chunks that reached the record through this scanner (held ones included), counted
       here so that a read need not ask the record's array its length (a cold cache line per read):
       take()'s, and those the decoder's Python methods appended when called from here (to_python).
       Above 0, the record is known to hold a chunk (it never loses one). */
    Py_ssize_t reached;
    PyObject *ms_frombytes, *tokens_frombytes, *usage_frombytes;
} Scanner;

static PyTypeObject ScannerType;

/* The attached scanners by socket: run_turns finds a ready stream's scanner here, not through the
   reactor's dict and the stream's attribute (a key object, a look-up and an attribute per read).
   Borrowed references: attach() sets an entry, detach() (the reactor's unregister) and the
   scanner's own clear or dealloc remove it, so an entry never outlives its scanner or its
   stream's registration. */
static Scanner **by_fd;
static int by_fd_cap;

static int
table_set(int fd, Scanner *scan)
{
    if (fd < 0) return 0;
    if (fd >= by_fd_cap) {
        int cap = by_fd_cap ? by_fd_cap : 256;
        while (cap <= fd) cap *= 2;
        Scanner **t = PyMem_Realloc(by_fd, (size_t)cap * sizeof(Scanner *));
        if (t == NULL) return PyErr_NoMemory(), -1;
        memset(t + by_fd_cap, 0, (size_t)(cap - by_fd_cap) * sizeof(Scanner *));
        by_fd = t;
        by_fd_cap = cap;
    }
    by_fd[fd] = scan;
    return 0;
}

static void
table_drop(Scanner *scan)
{
    if (scan->fd >= 0 && scan->fd < by_fd_cap && by_fd[scan->fd] == scan) by_fd[scan->fd] = NULL;
}

static PyObject *s_ttft_ms, *s_last_usage, *s_prompt_tokens, *s_pieces, *s_cr, *s_feed_python, *s_rest,
    *s_append, *s_chunk_ms, *s_chunk_tokens, *s_chunk_usage, *s_rec, *s_parser, *s_chat, *s_start_perf, *s_plain, *s_message_complete, *s_scanner, *s_has_partial, *s_frombytes;
static PyObject *one, *minus_one;

/* The decoder holds its scanner and the scanner its decoder: a cycle the collector must see
   (the decoder also drops it at close(), so a finished stream frees at once). */
static int
Scanner_traverse(Scanner *self, visitproc visit, void *arg)
{
    Py_VISIT(self->decoder);
    Py_VISIT(self->rec);
    Py_VISIT(self->pieces_owner);
    Py_VISIT(self->chunk_ms);
    Py_VISIT(self->ms_append);
    Py_VISIT(self->tokens_append);
    Py_VISIT(self->usage_append);
    Py_VISIT(self->parser_feed);
    Py_VISIT(self->response);
    Py_VISIT(self->pieces);
    Py_VISIT(self->parse_error);
    Py_VISIT(self->tls_read);
    Py_VISIT(self->tls_pending);
    Py_VISIT(self->ms_frombytes);
    Py_VISIT(self->tokens_frombytes);
    Py_VISIT(self->usage_frombytes);
    return 0;
}

static int
Scanner_clear(Scanner *self)
{
    Py_CLEAR(self->decoder);
    Py_CLEAR(self->rec);
    Py_CLEAR(self->pieces_owner);
    Py_CLEAR(self->chunk_ms);
    Py_CLEAR(self->ms_append);
    Py_CLEAR(self->tokens_append);
    Py_CLEAR(self->usage_append);
    Py_CLEAR(self->parser_feed);
    Py_CLEAR(self->response);
    Py_CLEAR(self->pieces);
    Py_CLEAR(self->parse_error);
    Py_CLEAR(self->tls_read);
    Py_CLEAR(self->tls_pending);
    Py_CLEAR(self->ms_frombytes);
    Py_CLEAR(self->tokens_frombytes);
    Py_CLEAR(self->usage_frombytes);
    table_drop(self);
    self->fd = -1;
    return 0;
}

static void
Scanner_dealloc(Scanner *self)
{
    PyObject_GC_UnTrack(self);
    Scanner_clear(self);
    PyMem_Free(self->held_ms);
    PyMem_Free(self->held_usage);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
get_attr_method(PyObject *owner, PyObject *name, PyObject *method)
{
    PyObject *obj = PyObject_GetAttr(owner, name);
    if (obj == NULL) return NULL;
    PyObject *m = PyObject_GetAttr(obj, method);
    Py_DECREF(obj);
    return m;
}

static int
Scanner_init(Scanner *self, PyObject *args, PyObject *kwds)
{
    PyObject *decoder;
    if (!PyArg_ParseTuple(args, "O", &decoder)) return -1;
    PyObject *rec = PyObject_GetAttr(decoder, s_rec);
    if (rec == NULL) return -1;
    Py_XSETREF(self->decoder, Py_NewRef(decoder));
    Py_XSETREF(self->rec, rec);
    Py_XSETREF(self->pieces_owner, PyObject_GetAttr(decoder, s_parser));
    Py_XSETREF(self->chunk_ms, PyObject_GetAttr(rec, s_chunk_ms));
    self->reached = 0; /* a new record: asked afresh */
    Py_XSETREF(self->ms_append, get_attr_method(rec, s_chunk_ms, s_append));
    Py_XSETREF(self->tokens_append, get_attr_method(rec, s_chunk_tokens, s_append));
    Py_XSETREF(self->usage_append, get_attr_method(decoder, s_chunk_usage, s_append));
    Py_XSETREF(self->ms_frombytes, get_attr_method(rec, s_chunk_ms, s_frombytes));
    Py_XSETREF(self->tokens_frombytes, get_attr_method(rec, s_chunk_tokens, s_frombytes));
    Py_XSETREF(self->usage_frombytes, get_attr_method(decoder, s_chunk_usage, s_frombytes));
    if (!self->pieces_owner || !self->chunk_ms || !self->ms_append || !self->tokens_append || !self->usage_append
        || !self->ms_frombytes || !self->tokens_frombytes || !self->usage_frombytes)
        return -1;
    PyObject *chat = PyObject_GetAttr(decoder, s_chat);
    if (chat == NULL) return -1;
    self->chat = PyObject_IsTrue(chat);
    Py_DECREF(chat);
    PyObject *plain = PyObject_GetAttr(decoder, s_plain);
    if (plain == NULL) return -1;
    self->plain = PyObject_IsTrue(plain);
    Py_DECREF(plain);
    self->fd = -1;
    PyObject *start = PyObject_GetAttr(rec, s_start_perf);
    if (start == NULL) return -1;
    self->start = PyFloat_AsDouble(start);
    Py_DECREF(start);
    if (self->chat < 0 || self->plain < 0 || PyErr_Occurred()) return -1;
    return 0;
}

static int
call1(PyObject *fn, PyObject *arg)
{
    PyObject *r = PyObject_CallOneArg(fn, arg);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int
set_int(PyObject *owner, PyObject *name, long long v)
{
    PyObject *o = PyLong_FromLongLong(v);
    if (o == NULL) return -1;
    int r = PyObject_SetAttr(owner, name, o);
    Py_DECREF(o);
    return r;
}

/* ---------------------------------------------------------------- held chunks

   Why hold them: the reactor's read of a usual chunk handed the record three array appends and,
   with usage in every chunk (vLLM's continuous usage), two attribute sets: five Python calls per
   paced chunk, more than the rest of its decode. A chunk the reactor's read takes (run_turns) is
   kept here instead and handed to the record, in bulk and in order, by flush(): before any of
   the decoder's Python code runs (it may append chunks of its own, or read the last usage), when
   a read's outcome goes back to the reactor to settle (an end, a failure), at the decoder's
   close() and when the reactor drops a stream. Nothing reads a record's chunks while the reactor
   still reads its stream, and every other entry (feed(), read(), plain()) leaves nothing held. */

static int
hold(Scanner *self, double t, int usage)
{
    if (self->held == self->held_cap) {
        Py_ssize_t cap = self->held_cap ? self->held_cap * 2 : 128;
        double *ms = PyMem_Realloc(self->held_ms, (size_t)cap * sizeof(double));
        if (ms == NULL) return PyErr_NoMemory(), -1;
        self->held_ms = ms;
        int *us = PyMem_Realloc(self->held_usage, (size_t)cap * sizeof(int));
        if (us == NULL) return PyErr_NoMemory(), -1;
        self->held_usage = us;
        self->held_cap = cap;
    }
    self->held_ms[self->held] = t;
    self->held_usage[self->held] = usage;
    self->held++;
    return 0;
}

static int
call_frombytes(PyObject *frombytes, const void *data, Py_ssize_t size)
{
    PyObject *b = PyBytes_FromStringAndSize((const char *)data, size);
    if (b == NULL) return -1;
    int r = call1(frombytes, b);
    Py_DECREF(b);
    return r;
}

/* Hand the held chunks and usage to the record and the decoder (see "held chunks"). 0, or -1. */
static int
flush(Scanner *self)
{
    Py_ssize_t n = self->held;
    if (n && self->decoder != NULL) {
        self->held = 0;
        int *ones = PyMem_Malloc((size_t)n * sizeof(int));
        if (ones == NULL) return PyErr_NoMemory(), -1;
        for (Py_ssize_t i = 0; i < n; i++) ones[i] = 1;
        int r = call_frombytes(self->ms_frombytes, self->held_ms, n * (Py_ssize_t)sizeof(double));
        if (r == 0) r = call_frombytes(self->tokens_frombytes, ones, n * (Py_ssize_t)sizeof(int));
        if (r == 0) r = call_frombytes(self->usage_frombytes, self->held_usage, n * (Py_ssize_t)sizeof(int));
        PyMem_Free(ones);
        if (r < 0) return -1;
    }
    if (self->last_usage_due) {
        self->last_usage_due = 0;
        if (set_int(self->decoder, s_last_usage, self->last_usage) < 0) return -1;
    }
    if (self->prompt_due) {
        self->prompt_due = 0;
        if (set_int(self->rec, s_prompt_tokens, self->prompt) < 0) return -1;
    }
    return 0;
}

/* detach(): the reactor no longer reads this stream (its unregister): run_turns must not find it. */
static PyObject *
Scanner_detach(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    table_drop(self);
    Py_RETURN_NONE;
}

static PyObject *
Scanner_flush(Scanner *self, PyObject *Py_UNUSED(ignored))
{
    if (flush(self) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Take one usual chunk into the record, as _plain does: at once, or held (see "held chunks").
   t: its stamp in ms since the request's start. */
static int
take(Scanner *self, Chunk *c, double t, int held)
{
    if (c->usage && (c->count > INT_MAX || c->count < INT_MIN)) held = 0; /* array("i") refuses it, as in Python */
    if (self->reached == 0) { /* the record's array is asked only until a chunk is known to be in it */
        Py_ssize_t before = PyObject_Size(self->chunk_ms);
        if (before < 0) return -1;
        if (before + self->held == 0) { /* the first content chunk: its stamp is the TTFT */
            PyObject *tf = PyFloat_FromDouble(t);
            if (tf == NULL) return -1;
            int r = PyObject_SetAttr(self->rec, s_ttft_ms, tf);
            Py_DECREF(tf);
            if (r < 0) return -1;
        }
    }
    if (held) {
        if (c->usage) {
            self->last_usage = c->count, self->last_usage_due = 1;
            if (c->has_prompt) self->prompt = c->prompt, self->prompt_due = 1;
        }
        int r = hold(self, t, c->usage ? (int)c->count : -1);
        if (r == 0) self->reached++;
        return r;
    }
    if (flush(self) < 0) return -1; /* (nothing is held outside the reactor's reads) */
    if (c->usage) {
        if (set_int(self->decoder, s_last_usage, c->count) < 0) return -1;
        if (c->has_prompt && set_int(self->rec, s_prompt_tokens, c->prompt) < 0) return -1;
    }
    PyObject *tf = PyFloat_FromDouble(t);
    if (tf == NULL) return -1;
    int r = call1(self->ms_append, tf);
    Py_DECREF(tf);
    if (r == 0) self->reached++;
    if (r < 0 || call1(self->tokens_append, one) < 0) return -1;
    if (!c->usage) return call1(self->usage_append, minus_one);
    PyObject *count = PyLong_FromLongLong(c->count);
    if (count == NULL) return -1;
    r = call1(self->usage_append, count);
    Py_DECREF(count);
    return r;
}

/* The SSE parser holds nothing back (no partial event, no lone "\r"). 1 yes, 0 no, -1 error. */
static int
parser_empty(Scanner *self)
{
    PyObject *pieces = PyObject_GetAttr(self->pieces_owner, s_pieces);
    if (pieces == NULL) return -1;
    int empty = PyList_CheckExact(pieces) && PyList_GET_SIZE(pieces) == 0;
    Py_DECREF(pieces);
    if (!empty) return 0;
    PyObject *cr = PyObject_GetAttr(self->pieces_owner, s_cr);
    if (cr == NULL) return -1;
    empty = cr == Py_False;
    Py_DECREF(cr);
    return empty;
}

/* The event at *p of text[0:n] (which holds "data: " lines, each but the last followed by one blank
   line): its payload's span, and *p moved to the next event (-1 after the last). 0: not that shape. */
static int
next_event(const char *buf, Py_ssize_t n, Py_ssize_t *p, Py_ssize_t *start, Py_ssize_t *end)
{
    Py_ssize_t at = *p;
    if (n - at < 6 || memcmp(buf + at, "data: ", 6) != 0) return 0;
    at += 6;
    *start = at;
    const char *nl = memchr(buf + at, '\n', n - at);
    if (nl == NULL) {
        *end = n;
        *p = -1;
        return 1;
    }
    *end = nl - buf;
    if (n - *end < 2 || buf[*end + 1] != '\n') return 0;
    *p = *end + 2;
    return 1;
}

/* The decoder's own method (feed_python or feed_events) for what this module does not take: held
   chunks first, then the call. 1: read on, 0: stop, -1: a Python error. */
static int
to_python(Scanner *self, PyObject *method, PyObject *arg, PyObject *now_obj)
{
    if (flush(self) < 0) return -1;
    self->sse_empty = 0; /* the Python parser may hold a partial event from now on */
    Py_ssize_t size = PyObject_Size(self->chunk_ms);
    if (size < 0) return -1;
    Py_ssize_t other = size + self->held - self->reached; /* the record's chunks not counted here */
    PyObject *r = PyObject_CallMethodObjArgs(self->decoder, method, arg, now_obj, NULL);
    PyObject *type, *exc, *tb; /* (kept aside while the array is asked its length) */
    PyErr_Fetch(&type, &exc, &tb);
    Py_ssize_t after = PyObject_Size(self->chunk_ms);
    if (after < 0) {
        Py_XDECREF(r);
        Py_XDECREF(type);
        Py_XDECREF(exc);
        Py_XDECREF(tb);
        return -1;
    }
    self->reached = after + self->held - other; /* (plain()'s takes, from the Python path, included) */
    PyErr_Restore(type, exc, tb);
    if (r == NULL) return -1;
    int go_on = PyObject_IsTrue(r);
    Py_DECREF(r);
    return go_on;
}

static int
to_python_bytes(Scanner *self, const char *buf, Py_ssize_t len, PyObject *data, PyObject *now_obj)
{
    if (data != NULL) return to_python(self, s_feed_python, data, now_obj);
    PyObject *b = PyBytes_FromStringAndSize(buf, len);
    if (b == NULL) return -1;
    int r = to_python(self, s_feed_python, b, now_obj);
    Py_DECREF(b);
    return r;
}

/* StreamDecoder.feed for buf[0:len] (the de-framed body of one read; data: the same bytes as an
   object, or NULL), stamped now. held: the usual chunks may stay held (see "held chunks").
   1: read on, 0: stop (the decoder said so), -1: a Python error. */
static int
feed_buf(Scanner *self, const char *buf, Py_ssize_t len, PyObject *data, PyObject *now_obj, double now, int held)
{
    if (self->decoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the scanner was cleared");
        return -1;
    }
    if (!self->plain) return to_python_bytes(self, buf, len, data, now_obj);
    /* SSEParser.feed's first case: whole events, nothing carried over, no "\r". */
    int whole = len >= 2 && buf[len - 1] == '\n' && buf[len - 2] == '\n' && memchr(buf, '\r', (size_t)len) == NULL;
    if (whole && !self->sse_empty) {
        int e = parser_empty(self);
        if (e < 0) return -1;
        whole = self->sse_empty = e;
    }
    /* _split_events' first case: every event one "data: " line. Checked over the whole read first
       (nothing may change before the read is known to be of this shape), then taken event by event. */
    Py_ssize_t text = len - 2;
    if (whole) {
        if (text == 0) return 1; /* no event at all (what the Python path finds too) */
        Py_ssize_t start, end, p = 0;
        while (p >= 0) {
            if (!next_event(buf, text, &p, &start, &end)) {
                whole = 0;
                break;
            }
        }
    }
    if (!whole) /* the general path does it all, as before (its _plain is this module's plain()) */
        return to_python_bytes(self, buf, len, data, now_obj);
    double t = (now - self->start) * 1000.0;
    Py_ssize_t start = 0, end = 0, p = 0;
    while (p >= 0) {
        Py_ssize_t at = p;
        next_event(buf, text, &p, &start, &end);
        Chunk c;
        if (usual_chunk(buf + start, end - start, self->chat, &c)) {
            if (take(self, &c, t, held) < 0) return -1;
            continue;
        }
        /* Not the usual chunk: the decoder's loop takes the events from this one on, in order. */
        PyObject *rest = PyList_New(0);
        if (rest == NULL) return -1;
        p = at;
        while (p >= 0) {
            next_event(buf, text, &p, &start, &end);
            PyObject *payload = PyBytes_FromStringAndSize(buf + start, end - start);
            if (payload == NULL || PyList_Append(rest, payload) < 0) {
                Py_XDECREF(payload);
                Py_DECREF(rest);
                return -1;
            }
            Py_DECREF(payload);
        }
        int r = to_python(self, s_rest, rest, now_obj);
        Py_DECREF(rest);
        return r;
    }
    return 1;
}

/* feed(data, now) -> bool: StreamDecoder.feed, as documented at the top of this file. */
static PyObject *
Scanner_feed(Scanner *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "feed(data: bytes, now: float)");
        return NULL;
    }
    double now = PyFloat_AsDouble(args[1]);
    if (now == -1.0 && PyErr_Occurred()) return NULL;
    int r = feed_buf(self, PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), args[0], args[1], now, 0);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* ssl's SSLWantReadError, SSLZeroReturnError and SSLEOFError: imported at the first TLS attach(). */
static PyObject *want_read, *zero_return, *eof_error, *read_size;

static int
ssl_errors(void)
{
    if (want_read != NULL) return 0;
    PyObject *ssl = PyImport_ImportModule("ssl");
    if (ssl == NULL) return -1;
    PyObject *w = PyObject_GetAttrString(ssl, "SSLWantReadError");
    PyObject *z = PyObject_GetAttrString(ssl, "SSLZeroReturnError");
    PyObject *e = PyObject_GetAttrString(ssl, "SSLEOFError");
    Py_DECREF(ssl);
    if (w == NULL || z == NULL || e == NULL) {
        Py_XDECREF(w);
        Py_XDECREF(z);
        Py_XDECREF(e);
        return -1;
    }
    want_read = w, zero_return = z, eof_error = e;
    return 0;
}

/* attach(fd, stamps, parser_feed, response, pieces, parse_error[, tls]): the stream read() reads.
   tls: the connection's OpenSSL object (ssl's _SSLSocket), or None for a plain socket. */
static PyObject *
Scanner_attach(Scanner *self, PyObject *const *args, Py_ssize_t nargs)
{
    if ((nargs != 6 && nargs != 7) || !PyList_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "attach(fd, stamps, parser_feed, response, pieces: list, parse_error[, tls])");
        return NULL;
    }
    int fd = (int)PyLong_AsLong(args[0]);
    int stamps = PyObject_IsTrue(args[1]);
    if (PyErr_Occurred() || stamps < 0) return NULL;
    PyObject *tls_read = NULL, *tls_pending = NULL;
    if (nargs == 7 && args[6] != Py_None) {
        if (ssl_errors() < 0) return NULL;
        tls_read = PyObject_GetAttrString(args[6], "read");
        tls_pending = tls_read ? PyObject_GetAttrString(args[6], "pending") : NULL;
        if (tls_pending == NULL) {
            Py_XDECREF(tls_read);
            return NULL;
        }
        stamps = 0; /* SSL_read reads the socket itself: no control data */
    }
    table_drop(self);
    if (table_set(fd, self) < 0) {
        Py_XDECREF(tls_read);
        Py_XDECREF(tls_pending);
        return NULL;
    }
    self->fd = fd;
    self->stamps = stamps;
    self->framing.state = FR_OFF; /* until frame() says the framing can be followed */
    self->sse_empty = 0;          /* checked at the first read */
    Py_XSETREF(self->parser_feed, Py_NewRef(args[2]));
    Py_XSETREF(self->response, Py_NewRef(args[3]));
    Py_XSETREF(self->pieces, Py_NewRef(args[4]));
    Py_XSETREF(self->parse_error, Py_NewRef(args[5]));
    Py_XSETREF(self->tls_read, tls_read);
    Py_XSETREF(self->tls_pending, tls_pending);
    Py_RETURN_NONE;
}

/* tls_read.read_tls in C: everything decryptable now, into *data, and *closed when the peer closed
   (TLS's close_notify, or a close without it, as suppress_ragged_eofs makes it). Returns 0 (*data
   set, maybe empty when closed), 1 when there is nothing yet (no whole record: "blocked"), -1 on a
   Python error (the read failed). One difference in cost, none in what is read: the Python loop
   reads until OpenSSL says "want read", an SSLWantReadError (an exception object) per read; here a
   read is followed by another only while OpenSSL holds decrypted bytes or the kernel holds bytes or
   the end of this socket (a one-byte MSG_PEEK), so the usual read of one record raises nothing. */
static int
tls_read_all(Scanner *self, PyObject **data, int *closed)
{
    PyObject *first = NULL, *parts = NULL;
    *closed = 0;
    for (;;) {
        PyObject *got = PyObject_CallOneArg(self->tls_read, read_size);
        if (got == NULL) {
            if (PyErr_ExceptionMatches(want_read)) {
                PyErr_Clear();
                break;
            }
            if (PyErr_ExceptionMatches(zero_return) || PyErr_ExceptionMatches(eof_error)) {
                PyErr_Clear();
                *closed = 1;
                break;
            }
            goto fail;
        }
        if (!PyBytes_Check(got)) {
            Py_DECREF(got);
            PyErr_SetString(PyExc_TypeError, "the TLS object's read() did not return bytes");
            goto fail;
        }
        if (PyBytes_GET_SIZE(got) == 0) {
            Py_DECREF(got);
            *closed = 1;
            break;
        }
        if (first == NULL) {
            first = got;
        } else {
            if (parts == NULL && (parts = PyList_New(0)) != NULL && PyList_Append(parts, first) < 0) Py_CLEAR(parts);
            int r = parts == NULL ? -1 : PyList_Append(parts, got);
            Py_DECREF(got);
            if (r < 0) goto fail;
        }
        PyObject *p = PyObject_CallNoArgs(self->tls_pending);
        if (p == NULL) goto fail;
        long pending = PyLong_AsLong(p);
        Py_DECREF(p);
        if (pending == -1 && PyErr_Occurred()) goto fail;
        if (pending > 0) continue;
        char peek;
        if (recv(self->fd, &peek, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        /* bytes in the kernel, or its end (0), or an error: read again, and let OpenSSL say what it is */
    }
    if (first == NULL) {
        if (!*closed) return 1;
        *data = PyBytes_FromStringAndSize(NULL, 0);
        return *data == NULL ? -1 : 0;
    }
    if (parts == NULL) {
        *data = first;
        return 0;
    }
    Py_DECREF(first);
    PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
    *data = empty ? _PyBytes_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    Py_DECREF(parts);
    return *data == NULL ? -1 : 0;
fail:
    Py_XDECREF(first);
    Py_XDECREF(parts);
    return -1;
}

/* The exception just raised, taken out of the error state (to hand to the reactor as a value). */
static PyObject *
caught(void)
{
    PyObject *type, *exc, *tb; /* (PyErr_GetRaisedException is 3.12's) */
    PyErr_Fetch(&type, &exc, &tb);
    if (type == NULL) return NULL;
    PyErr_NormalizeException(&type, &exc, &tb);
    if (!PyErr_GivenExceptionMatches(type, PyExc_Exception)) { /* not ours to judge */
        PyErr_Restore(type, exc, tb);
        return NULL;
    }
    if (tb != NULL) PyException_SetTraceback(exc, tb);
    Py_DECREF(type);
    Py_XDECREF(tb);
    return exc;
}

static PyObject *
outcome(const char *kind, PyObject *exc, Py_ssize_t added, PyObject *arrived)
{
    PyObject *r = Py_BuildValue("(sOnO)", kind, exc ? exc : Py_None, added, arrived);
    Py_XDECREF(exc);
    Py_DECREF(arrived);
    return r;
}

/* After the parser took a read (data): follow the framing over it, and stop following (FR_OFF) unless
   what this takes out of the framing is what the parser handed over (chunk, or NULL for nothing).
   0, or -1 on a Python error. */
static int
follow(Scanner *self, PyObject *data, PyObject *chunk)
{
    if (self->framing.state == FR_OFF) return 0;
    Py_ssize_t n = PyBytes_GET_SIZE(data), len = 0;
    char *out = PyMem_Malloc(n > 0 ? (size_t)n : 1);
    if (out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t want = chunk == NULL ? 0 : PyBytes_GET_SIZE(chunk);
    if (deframe(&self->framing, PyBytes_AS_STRING(data), n, out, &len) < 0 || len != want
        || (len && memcmp(out, PyBytes_AS_STRING(chunk), (size_t)len) != 0))
        self->framing.state = FR_OFF;
    PyMem_Free(out);
    return 0;
}

/* frame(head, body) -> bool: follow the chunked framing from here on (see "chunked framing" above).
   head: every byte the response's parser was fed before the reactor took the stream (the status
   line, the headers and whatever body came with them); body: what the parser handed over of them,
   joined. True when the framing after the head's end gives exactly that body (the reads are then
   de-framed here where they can be); False, and the parser does it all, otherwise. Only for a
   response whose Transfer-Encoding is chunked: the caller checks that. */
static PyObject *
Scanner_frame(Scanner *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "frame(head: bytes, body: bytes)");
        return NULL;
    }
    self->framing.state = FR_OFF;
    const char *raw = PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    const char *end = n >= 4 ? memmem(raw, (size_t)n, "\r\n\r\n", 4) : NULL;
    if (end == NULL) Py_RETURN_FALSE;
    Py_ssize_t at = end + 4 - raw, len = 0, want = PyBytes_GET_SIZE(args[1]);
    char *out = PyMem_Malloc(n - at > 0 ? (size_t)(n - at) : 1);
    if (out == NULL) return PyErr_NoMemory();
    Framing f = {FR_SIZE, 0, 0};
    int ok = deframe(&f, raw + at, n - at, out, &len) == 0 && len == want
             && (len == 0 || memcmp(out, PyBytes_AS_STRING(args[1]), (size_t)len) == 0);
    PyMem_Free(out);
    if (ok) self->framing = f;
    return PyBool_FromLong(ok);
}

static _Thread_local char read_buf[READ_SIZE];   /* a plain read's bytes (one reactor thread uses it) */
static _Thread_local char body_buf[READ_SIZE];   /* their chunks' data, de-framed */

/* An outcome for the reactor to settle, the held chunks handed over first (it may end the stream). */
static PyObject *
settle(Scanner *self, const char *kind, PyObject *exc, Py_ssize_t added, double arrived)
{
    if (strcmp(kind, "blocked") != 0 && flush(self) < 0) {
        Py_XDECREF(exc);
        return NULL;
    }
    PyObject *stamp = stamp_object(arrived);
    if (stamp == NULL) {
        Py_XDECREF(exc);
        return NULL;
    }
    return outcome(kind, exc, added, stamp);
}

/* One reactor read of this stream; what read() does, but for the usual outcome (Py_None, with
   *added: the content chunks it stamped, *arrived: the kernel's wall-clock stamp of the newest
   bytes or NAN) no objects are made, and the chunks it took may stay held (see "held chunks").
   Any other outcome is read()'s (kind, exception, added, arrived), held chunks handed over first
   except for "blocked". NULL on a Python error. */
static PyObject *
read_once(Scanner *self, PyObject *now_obj, double now, Py_ssize_t *added, double *arrived)
{
    if (self->fd < 0 || self->pieces == NULL || self->decoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "read() before attach()");
        return NULL;
    }
    *added = 0;
    *arrived = NAN;
    PyObject *data = NULL; /* the read's bytes as an object, once needed (always over TLS) */
    const char *buf;
    int closed = 0; /* over TLS: the peer closed after (or without) these bytes */
    Py_ssize_t n;
    if (self->tls_read != NULL) {
        int r = tls_read_all(self, &data, &closed);
        if (r == 1) return settle(self, "blocked", NULL, 0, NAN);
        if (r < 0) {
            PyObject *exc = caught();
            if (exc == NULL) return NULL;
            return settle(self, PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_OSError) ? "oserror" : "error", exc, 0, NAN);
        }
        buf = PyBytes_AS_STRING(data);
        n = PyBytes_GET_SIZE(data);
    } else {
        n = recv_raw(self->fd, self->stamps, read_buf, READ_SIZE, arrived);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return settle(self, "blocked", NULL, 0, NAN);
            PyErr_SetFromErrno(PyExc_OSError);
            return settle(self, "oserror", caught(), 0, NAN);
        }
        buf = read_buf;
    }
    if (n == 0) {
        Py_XDECREF(data);
        return settle(self, "eof", NULL, 0, NAN);
    }
    Py_ssize_t before = self->reached;
    /* The read's chunk data: de-framed here when the read is whole chunks between two chunks'
       starts (the parser is not fed: it stays between two chunks), else through the parser. */
    const char *body = NULL;
    Py_ssize_t body_len = 0;
    PyObject *chunk = NULL;   /* the parser's de-framed pieces, joined */
    char *spill = NULL;       /* a de-framed read too long for body_buf (a TLS read of many records) */
    int parsed = 1;           /* the parser was fed (and may have ended the message) */
    if (AT_BOUNDARY(self->framing)) {
        Framing f = self->framing;
        char *out = body_buf;
        if (n > READ_SIZE && (out = spill = PyMem_Malloc((size_t)n)) == NULL) {
            Py_XDECREF(data);
            return PyErr_NoMemory();
        }
        if (deframe(&f, buf, n, out, &body_len) == 0 && AT_BOUNDARY(f)) {
            self->framing = f;
            self->deframed++;
            parsed = 0;
            body = out;
        }
    }
    if (parsed) {
        if (data == NULL && (data = PyBytes_FromStringAndSize(buf, n)) == NULL) {
            PyMem_Free(spill);
            return NULL;
        }
        PyObject *argv[2] = {self->response, data};
        PyObject *r = PyObject_Vectorcall(self->parser_feed, argv, 2, NULL);
        if (r == NULL) {
            Py_DECREF(data);
            PyMem_Free(spill);
            PyObject *exc = caught();
            if (exc == NULL) return NULL;
            int framing = PyErr_GivenExceptionMatches(exc, self->parse_error);
            return settle(self, framing ? "http" : "error", exc, 0, *arrived);
        }
        Py_DECREF(r);
        Py_ssize_t npieces = PyList_GET_SIZE(self->pieces);
        if (npieces) {
            if (npieces == 1 && PyBytes_CheckExact(PyList_GET_ITEM(self->pieces, 0))) {
                chunk = Py_NewRef(PyList_GET_ITEM(self->pieces, 0));
            } else {
                PyObject *empty = PyBytes_FromStringAndSize(NULL, 0);
                chunk = empty ? _PyBytes_Join(empty, self->pieces) : NULL;
                Py_XDECREF(empty);
            }
            if (chunk == NULL || PyList_SetSlice(self->pieces, 0, npieces, NULL) < 0) {
                Py_XDECREF(chunk);
                Py_DECREF(data);
                PyMem_Free(spill);
                return NULL;
            }
            body = PyBytes_AS_STRING(chunk);
            body_len = PyBytes_GET_SIZE(chunk);
        }
        if (follow(self, data, chunk) < 0) {
            Py_XDECREF(chunk);
            Py_DECREF(data);
            PyMem_Free(spill);
            return NULL;
        }
    }
    Py_XDECREF(data);
    if (body != NULL) {
        int fed = feed_buf(self, body, body_len, chunk, now_obj, now, 1);
        Py_XDECREF(chunk);
        PyMem_Free(spill);
        PyObject *exc = NULL;
        if (fed < 0 && (exc = caught()) == NULL) return NULL;
        *added = self->reached - before;
        if (exc != NULL) return settle(self, "error", exc, *added, *arrived);
        if (fed == 0) return settle(self, "end", NULL, *added, *arrived);
    } else {
        PyMem_Free(spill);
    }
    int done = 0;
    if (parsed) { /* else the parser was not fed: the message cannot have ended */
        PyObject *complete = PyObject_GetAttr(self->response, s_message_complete);
        if (complete == NULL) return NULL;
        done = PyObject_IsTrue(complete);
        Py_DECREF(complete);
    }
    if (done || closed) return settle(self, "end", NULL, *added, *arrived); /* closed: as _read_python ends it */
    Py_RETURN_NONE;
}

/* read(now) -> (added, arrived) or (kind, exception, added, arrived): one reactor read of this stream.

   Does what the reactor's loop did per ready stream: recvmsg (with the arrival stamp when the
   socket has them), the chunked framing taken off (here, or by geventhttpclient's C parser into
   the pieces list), the decode of the body, and the check for the message's end.
   ``added``: how many content chunks the read stamped; ``arrived``: the kernel's wall-clock stamp
   of the newest bytes, or None. The second form says what the reactor must settle: "blocked"
   (nothing to read after all), "oserror" (the read failed), "eof", "http" (bad framing), "error"
   (the decode raised), "end" (the stream is over: the decoder said stop, or the message is
   complete). The record holds every chunk read when this returns, unless ``held`` is true: then
   the usual chunks may stay held as the reactor's reads leave them (run_turns; the tests read
   that way to check the order they reach the record in). */
static PyObject *
Scanner_read(Scanner *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "read(now, held=False)");
        return NULL;
    }
    PyObject *now_obj = args[0];
    double now = PyFloat_AsDouble(now_obj);
    if (now == -1.0 && PyErr_Occurred()) return NULL;
    int held = nargs == 2 ? PyObject_IsTrue(args[1]) : 0;
    if (held < 0) return NULL;
    Py_ssize_t added;
    double arrived;
    PyObject *out = read_once(self, now_obj, now, &added, &arrived);
    if (out == NULL) return NULL;
    if (!held && flush(self) < 0) { /* (an outcome other than "blocked" has flushed already) */
        Py_DECREF(out);
        return NULL;
    }
    if (out != Py_None) return out;
    Py_DECREF(out);
    PyObject *stamp = stamp_object(arrived);
    if (stamp == NULL) return NULL;
    return Py_BuildValue("(nN)", added, stamp);
}

/* The stamp delay of one read that stamped content chunks (added > 0), counted as the reactor's
   loop counts it (reactor.py): against the kernel's arrival stamp where there is one (into
   measured), else 0 for a read whose epoll call waited (woken), else the bound (bounds). Each
   array here is a local run of values, handed to the reactor's arrays every few turns (run_turns). 0, or -1. */
typedef struct {
    double *v;
    int n;
} Run;

static int
count_delay(Scanner *scan, double arrived, Py_ssize_t added, int waited, double wall_now, double bound_ms,
            Run *measured, Run *woken, Run *bounds)
{
    if (!isnan(arrived)) {
        double ms = (wall_now - arrived) * 1000.0;
        if (!waited && ms < bound_ms) {
            int partial = added > 1;
            if (!partial && !scan->sse_empty) { /* (a parser known to be empty holds no partial event) */
                PyObject *hp = PyObject_GetAttr(scan->pieces_owner, s_has_partial);
                partial = hp == NULL ? -1 : PyObject_IsTrue(hp);
                Py_XDECREF(hp);
            }
            if (partial < 0) return -1;
            if (partial) ms = bound_ms;
        }
        measured->v[measured->n++] = ms > 0.0 ? ms : 0.0;
    } else if (waited) {
        woken->v[woken->n++] = 0.0;
    } else {
        bounds->v[bounds->n++] = bound_ms;
    }
    return 0;
}

/* A run of delays onto its array("d") of the reactor (one frombytes call). */
static int
extend(PyObject *arr, Run *run)
{
    if (run->n == 0) return 0;
    PyObject *b = PyBytes_FromStringAndSize((const char *)run->v, (Py_ssize_t)run->n * (Py_ssize_t)sizeof(double));
    if (b == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(arr, s_frombytes, b);
    Py_DECREF(b);
    if (r == NULL) return -1;
    Py_DECREF(r);
    run->n = 0;
    return 0;
}

#ifdef __linux__
#include <sys/epoll.h>

#define MAX_EVENTS 1023 /* select.epoll.poll's default (FD_SETSIZE - 1) */

static PyObject *s_batch_ms, *s_tick_lag_ms, *s_measured_ms, *s_woken_tail_ms, *s_waiting_bound_ms;

/* The clocks of time.perf_counter and time.time, read here (no float objects per turn). Linux's
   perf_counter is CLOCK_MONOTONIC in ns, as a double divided by 1e9: the same value to the bit as
   Python's (checked at import: own_clocks is 0, and Python's functions are called, if not). */
static int own_clocks = 1;
static PyObject *perf_counter_fn, *wall_time_fn;

static double
clock_s(clockid_t id, PyObject *fallback)
{
    if (!own_clocks) {
        PyObject *r = PyObject_CallNoArgs(fallback);
        double v = r ? PyFloat_AsDouble(r) : NAN;
        Py_XDECREF(r);
        return v;
    }
    struct timespec ts;
    clock_gettime(id, &ts);
    long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return (double)ns / 1e9;
}

#define PERF() clock_s(CLOCK_MONOTONIC, perf_counter_fn)
#define WALL() clock_s(CLOCK_REALTIME, wall_time_fn)

static int
extend_attr(PyObject *owner, PyObject *name, Run *run)
{
    if (run->n == 0) return 0;
    PyObject *arr = PyObject_GetAttr(owner, name);
    if (arr == NULL) return -1;
    int r = extend(arr, run);
    Py_DECREF(arr);
    return r;
}

/* The turns' figures: the stamp delays (measured, woken, bounds), the tick's lateness and the batch
   times of many turns are kept here and handed to the reactor's arrays together, at most
   HAND_OVER_S after the first, whenever run_turns returns, and before a buffer could overflow. One
   turn is usually one or two paced chunks, and a hand-over per turn (an attribute, a bytes object
   and a method call per array) cost as much as those chunks' parse. The figures are the same, in
   the same order; the monitor (load/monitor.py) sees a turn's up to 20 ms later, and a level's
   last few ms of figures may count in the next level's (or go with its warmup). */
#define ACC (4 * MAX_EVENTS)
#define HAND_OVER_S 0.02
static _Thread_local double acc_measured[ACC], acc_woken[ACC], acc_bounds[ACC], acc_lag[ACC], acc_batch[ACC];

/* figures: measured, woken, bounds, lag, batch (run_turns' order). 0, or -1 on a Python error. */
static int
hand_over(PyObject *reactor, Run **figures)
{
    PyObject *names[] = {s_measured_ms, s_woken_tail_ms, s_waiting_bound_ms, s_tick_lag_ms, s_batch_ms};
    for (int i = 0; i < 5; i++)
        if (extend_attr(reactor, names[i], figures[i]) < 0) return -1;
    return 0;
}

/* run_turns(epfd, streams, wake, reactor, clock, waited_s, tick_s, max_turns)
       -> (now, wall_now, waited, bound_ms, ready, rest)

   The reactor's loop (reactor.py says what it measures and why), turn after turn, in C: the wait
   for the next 10 ms tick (epoll counts whole ms, rounding up), the GIL released as
   select.epoll.poll releases it; one stamp for the whole batch as the wait returns; the tick's
   lateness when the wait ran to its end (reactor.tick_lag_ms); every ready stream that has a
   scanner read, its chunks held (see "held chunks") and its stamp delay counted
   (reactor.measured_ms, woken_tail_ms or waiting_bound_ms); the batch's time (reactor.batch_ms).
   Why in C: per wake-up the Python loop's own lines and epoll.poll's list of tuples cost as much
   as a paced chunk's decode. It returns after a turn whose batch held something the Python loop
   must see -- ``rest``: (fd, outcome) in the batch's order, for the wake-up pipe and streams read
   in Python (outcome None) and the reads whose outcome the reactor settles -- with that turn's
   stamps, whether its wait waited, and the bound of a read whose data was waiting; that turn's
   batch time is then the caller's to add. Or after ``max_turns`` turns (0: no limit), with an
   empty ``rest``. clock: array("d") [next tick, last return], kept across calls. */
static PyObject *
run_turns(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "run_turns(epfd, streams: dict, wake, reactor, clock: array('d'), waited_s, tick_s, max_turns)");
        return NULL;
    }
    int epfd = (int)PyLong_AsLong(args[0]);
    PyObject *streams = args[1];
    long wake = PyLong_AsLong(args[2]);
    PyObject *reactor = args[3];
    double waited_s = PyFloat_AsDouble(args[5]), tick_s = PyFloat_AsDouble(args[6]);
    long max_turns = PyLong_AsLong(args[7]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer clock;
    if (PyObject_GetBuffer(args[4], &clock, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) return NULL;
    if (clock.len != 2 * (Py_ssize_t)sizeof(double) || clock.format == NULL || strcmp(clock.format, "d") != 0) {
        PyBuffer_Release(&clock);
        PyErr_SetString(PyExc_TypeError, "clock: array('d', [next_tick, last_return])");
        return NULL;
    }
    double *state = (double *)clock.buf; /* [next tick, last return] */
    struct epoll_event ev[MAX_EVENTS];
    /* The turns' figures, handed to the reactor's arrays together (see "the turns' figures") */
    Run m = {acc_measured, 0}, w = {acc_woken, 0}, b = {acc_bounds, 0}, lag = {acc_lag, 0}, batch = {acc_batch, 0};
    Run *figures[] = {&m, &w, &b, &lag, &batch};
    double handed = PERF(); /* when they were last handed over */
    PyObject *rest = NULL, *now_obj = NULL;
    for (long turn = 1;; turn++) {
        double before = PERF();
        double wait = state[0] - before;
        int wait_ms = wait > 0.0 ? (int)ceil(wait * 1000.0) : 0;
        int n;
        Py_BEGIN_ALLOW_THREADS
        n = epoll_wait(epfd, ev, MAX_EVENTS, wait_ms);
        Py_END_ALLOW_THREADS
        if (n < 0) {
            if (errno != EINTR) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto fail;
            }
            n = 0; /* a signal: an empty batch */
        }
        double now = PERF(), wall_now = WALL();
        if (PyErr_Occurred()) goto fail;
        double promised = before + wait_ms / 1000.0;
        if (m.n + n > ACC || w.n + n > ACC || b.n + n > ACC || lag.n >= ACC || batch.n >= ACC) {
            if (hand_over(reactor, figures) < 0) goto fail; /* room for this turn's */
            handed = now;
        }
        if (now >= promised) { /* how late this thread ran past a wake-up the kernel promised */
            lag.v[lag.n++] = (now - promised) * 1000.0;
            state[0] = now + tick_s;
        }
        int waited = now - before > waited_s;
        double bound_ms = (now - state[1]) * 1000.0;
        state[1] = now;
        if ((now_obj = PyFloat_FromDouble(now)) == NULL) goto fail;
        for (int i = 0; i < n; i++) {
            int fd = ev[i].data.fd;
            PyObject *outcome = NULL; /* NULL: the Python loop reads it (or it is the wake-up pipe) */
            if (fd != wake) {
                PyObject *sc = fd < by_fd_cap && by_fd[fd] != NULL ? Py_NewRef((PyObject *)by_fd[fd]) : NULL;
                if (sc == NULL) { /* not a scanner's: a stream read in Python, or not (or no longer) ours */
                    PyObject *key = PyLong_FromLong(fd);
                    if (key == NULL) goto fail;
                    PyObject *stream = PyDict_GetItemWithError(streams, key); /* borrowed */
                    Py_DECREF(key);
                    if (stream == NULL) {
                        if (PyErr_Occurred()) goto fail;
                        continue;
                    }
                    if ((sc = PyObject_GetAttr(stream, s_scanner)) == NULL) goto fail;
                }
                if (PyObject_TypeCheck(sc, &ScannerType)) {
                    Scanner *scan = (Scanner *)sc;
                    Py_ssize_t added;
                    double arrived;
                    PyObject *out = read_once(scan, now_obj, now, &added, &arrived);
                    if (out == NULL) {
                        Py_DECREF(sc);
                        goto fail;
                    }
                    if (out == Py_None) { /* the usual: its delay counted here, its chunks maybe held */
                        Py_DECREF(out);
                        int rc = added > 0 ? count_delay(scan, arrived, added, waited, wall_now, bound_ms, &m, &w, &b) : 0;
                        Py_DECREF(sc);
                        if (rc < 0) goto fail;
                        continue;
                    }
                    outcome = out; /* the reactor settles it */
                }
                Py_DECREF(sc);
            }
            if (rest == NULL && (rest = PyList_New(0)) == NULL) {
                Py_XDECREF(outcome);
                goto fail;
            }
            PyObject *item = Py_BuildValue("(iN)", fd, outcome ? outcome : Py_NewRef(Py_None));
            if (item == NULL) goto fail;
            int r = PyList_Append(rest, item);
            Py_DECREF(item);
            if (r < 0) goto fail;
        }
        if (rest != NULL || (max_turns > 0 && turn >= max_turns)) {
            if (rest == NULL && n) batch.v[batch.n++] = (PERF() - now) * 1000.0; /* else the caller's, after rest */
            if (hand_over(reactor, figures) < 0) goto fail;
            if (rest == NULL && (rest = PyList_New(0)) == NULL) goto fail;
            PyBuffer_Release(&clock);
            PyObject *wall_obj = PyFloat_FromDouble(wall_now);
            if (wall_obj == NULL) goto fail_released;
            return Py_BuildValue("(NNidiN)", now_obj, wall_obj, waited, bound_ms, n, rest);
        }
        if (n) batch.v[batch.n++] = (PERF() - now) * 1000.0;
        if (now - handed >= HAND_OVER_S) {
            if (hand_over(reactor, figures) < 0) goto fail;
            handed = now;
        }
        Py_CLEAR(now_obj);
    }
fail:
    PyBuffer_Release(&clock);
fail_released:
    Py_XDECREF(now_obj);
    Py_XDECREF(rest);
    return NULL;
}

/* Whether this module's clocks read what time.perf_counter and time.time read (see own_clocks). */
static int
check_clocks(void)
{
    for (int i = 0; i < 3; i++) {
        PyObject *a = PyObject_CallNoArgs(perf_counter_fn);
        if (a == NULL) return -1;
        double mine = clock_s(CLOCK_MONOTONIC, NULL);
        PyObject *c = PyObject_CallNoArgs(perf_counter_fn);
        if (c == NULL) {
            Py_DECREF(a);
            return -1;
        }
        double lo = PyFloat_AsDouble(a), hi = PyFloat_AsDouble(c);
        Py_DECREF(a);
        Py_DECREF(c);
        if (lo <= mine && mine <= hi) return 0;
    }
    own_clocks = 0;
    return 0;
}
#endif

/* plain(events, i, now) -> int: StreamDecoder._plain over a list of events (the general path's). */
static PyObject *
Scanner_plain(Scanner *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "plain(events: list, i: int, now: float)");
        return NULL;
    }
    if (self->decoder == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "the scanner was cleared");
        return NULL;
    }
    PyObject *events = args[0];
    Py_ssize_t i = PyLong_AsSsize_t(args[1]);
    double now = PyFloat_AsDouble(args[2]);
    if (PyErr_Occurred()) return NULL;
    double t = (now - self->start) * 1000.0;
    for (; i < PyList_GET_SIZE(events); i++) {
        PyObject *payload = PyList_GET_ITEM(events, i);
        Chunk c;
        if (!PyBytes_CheckExact(payload)
            || !usual_chunk(PyBytes_AS_STRING(payload), PyBytes_GET_SIZE(payload), self->chat, &c))
            break;
        if (take(self, &c, t, 0) < 0) return NULL;
    }
    return PyLong_FromSsize_t(i);
}

/* usual(payload, chat) -> None or (count or None, prompt or None): the check alone, for the tests. */
static PyObject *
usual(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyBytes_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "usual(payload: bytes, chat: bool)");
        return NULL;
    }
    int chat = PyObject_IsTrue(args[1]);
    if (chat < 0) return NULL;
    Chunk c;
    if (!usual_chunk(PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]), chat, &c)) Py_RETURN_NONE;
    PyObject *count = c.usage ? PyLong_FromLongLong(c.count) : Py_NewRef(Py_None);
    PyObject *prompt = c.usage && c.has_prompt ? PyLong_FromLongLong(c.prompt) : Py_NewRef(Py_None);
    if (count == NULL || prompt == NULL) {
        Py_XDECREF(count);
        Py_XDECREF(prompt);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, count, prompt);
    Py_DECREF(count);
    Py_DECREF(prompt);
    return out;
}

static PyMethodDef Scanner_methods[] = {
    {"feed", (PyCFunction)(void (*)(void))Scanner_feed, METH_FASTCALL,
     "feed(data, now) -> bool: StreamDecoder.feed for one read (False: stop reading)."},
    {"attach", (PyCFunction)(void (*)(void))Scanner_attach, METH_FASTCALL,
     "attach(fd, stamps, parser_feed, response, pieces, parse_error[, tls]): the stream read() reads."},
    {"detach", (PyCFunction)Scanner_detach, METH_NOARGS,
     "detach(): the reactor stopped reading this stream (run_turns finds it no more)."},
    {"flush", (PyCFunction)Scanner_flush, METH_NOARGS,
     "flush(): hand the chunks the reactor's reads hold to the record (see \"held chunks\" in _scanner.c)."},
    {"frame", (PyCFunction)(void (*)(void))Scanner_frame, METH_FASTCALL,
     "frame(head, body) -> bool: de-frame the usual reads here, following the framing from the head's end."},
    {"read", (PyCFunction)(void (*)(void))Scanner_read, METH_FASTCALL,
     "read(now, held=False) -> (added, arrived) or (kind, exception, added, arrived): one read of the attached stream."},
    {"plain", (PyCFunction)(void (*)(void))Scanner_plain, METH_FASTCALL,
     "plain(events, i, now) -> int: StreamDecoder._plain in C."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Scanner_members[] = {
    {"deframed", T_PYSSIZET, offsetof(Scanner, deframed), READONLY,
     "How many reads this scanner de-framed itself (the HTTP parser not fed: see frame())."},
    {"held", T_PYSSIZET, offsetof(Scanner, held), READONLY,
     "Content chunks the reactor's reads took that the record does not hold yet (see flush())."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ScannerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "loadtest.client._scanner.Scanner",
    .tp_basicsize = sizeof(Scanner),
    .tp_dealloc = (destructor)Scanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)Scanner_traverse,
    .tp_clear = (inquiry)Scanner_clear,
    .tp_doc = "One stream's per-read scanner, bound to its StreamDecoder.",
    .tp_methods = Scanner_methods,
    .tp_members = Scanner_members,
    .tp_init = (initproc)Scanner_init,
    .tp_new = PyType_GenericNew,
    .tp_free = PyObject_GC_Del,
};

static PyMethodDef module_methods[] = {
    {"recv_stamped", (PyCFunction)(void (*)(void))recv_stamped, METH_FASTCALL,
     "recv_stamped(fd, size) -> (bytes, arrival wall-clock seconds or None)"},
#ifdef __linux__
    {"run_turns", (PyCFunction)(void (*)(void))run_turns, METH_FASTCALL,
     "run_turns(epfd, streams, wake, reactor, clock, waited_s, tick_s, max_turns)"
     " -> (now, wall_now, waited, bound_ms, ready, rest): the reactor's loop until it must see something."},
#endif
    {"usual", (PyCFunction)(void (*)(void))usual, METH_FASTCALL,
     "usual(payload, chat) -> None, or (completion count or None, prompt count or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scanner", "The client's per-read scanner (see loadtest/client/scanner.py).", -1,
    module_methods,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC
PyInit__scanner(void)
{
    INTERN(s_ttft_ms, "ttft_ms");
    INTERN(s_last_usage, "last_usage");
    INTERN(s_prompt_tokens, "prompt_tokens");
    INTERN(s_pieces, "_pieces");
    INTERN(s_cr, "_cr");
    INTERN(s_feed_python, "feed_python");
    INTERN(s_rest, "feed_events");
    INTERN(s_append, "append");
    INTERN(s_frombytes, "frombytes");
    INTERN(s_chunk_ms, "chunk_ms");
    INTERN(s_chunk_tokens, "chunk_tokens");
    INTERN(s_chunk_usage, "chunk_usage");
    INTERN(s_rec, "rec");
    INTERN(s_parser, "parser");
    INTERN(s_chat, "chat");
    INTERN(s_plain, "plain");
    INTERN(s_scanner, "scanner");
    INTERN(s_has_partial, "has_partial");
    INTERN(s_message_complete, "message_complete");
    INTERN(s_start_perf, "start_perf");
    if ((read_size = PyLong_FromLong(READ_SIZE)) == NULL) return NULL;
    if ((one = PyLong_FromLong(1)) == NULL || (minus_one = PyLong_FromLong(-1)) == NULL) return NULL;
#ifdef __linux__
    PyObject *time_mod = PyImport_ImportModule("time");
    if (time_mod == NULL) return NULL;
    perf_counter_fn = PyObject_GetAttrString(time_mod, "perf_counter");
    wall_time_fn = PyObject_GetAttrString(time_mod, "time");
    Py_DECREF(time_mod);
    if (perf_counter_fn == NULL || wall_time_fn == NULL) return NULL;
    INTERN(s_batch_ms, "batch_ms");
    INTERN(s_tick_lag_ms, "tick_lag_ms");
    INTERN(s_measured_ms, "measured_ms");
    INTERN(s_woken_tail_ms, "woken_tail_ms");
    INTERN(s_waiting_bound_ms, "waiting_bound_ms");
    if (check_clocks() < 0) return NULL;
#endif
    if (PyType_Ready(&ScannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Scanner", (PyObject *)&ScannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
