/*
 * Strict JSON parsing (jsonutil.h). json-c's tokener, in strict mode,
 * builds the value; a second pass over the same text, a small RFC 8259
 * scanner, refuses what json-c takes even then (single quotes, NaN and
 * Infinity, duplicate keys) and names the byte where it stands. Pure; any
 * thread.
 */
#include "jsonutil/doc.h"
#include "jsonutil/jsonutil.h"

#include <json-c/linkhash.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* json-c's own nesting limit is 32; the scanner follows what it built. */
#define SCAN_DEPTH_MAX 64

struct scan {
    const char *s;
    size_t len, pos;
    struct jsonutil_syntax *syn;
    int depth;
};

static int scan_fail(struct scan *sc, size_t at, const char *fmt, ...) BERTH_FORMAT(3, 4);

static int
scan_fail(struct scan *sc, size_t at, const char *fmt, ...)
{
    if (sc->syn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sc->syn->why, sizeof(sc->syn->why), fmt, ap);
        va_end(ap);
        sc->syn->offset = at;
        sc->syn->truncated = at >= sc->len;
    }
    return -EINVAL;
}

static void
scan_ws(struct scan *sc)
{
    while (sc->pos < sc->len) {
        char c = sc->s[sc->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        sc->pos++;
    }
}

/* Whitespace, then: a comment where JSON has none is worth naming. */
static bool
scan_comment_here(const struct scan *sc)
{
    return sc->pos + 1 < sc->len && sc->s[sc->pos] == '/' &&
           (sc->s[sc->pos + 1] == '*' || sc->s[sc->pos + 1] == '/');
}

static int scan_value(struct scan *sc);

/* A string at pos (which holds '"'); leaves pos after the closing quote. */
static int
scan_string(struct scan *sc, size_t *start, size_t *end, bool *escaped)
{
    if (sc->pos >= sc->len || sc->s[sc->pos] != '"') {
        if (sc->pos < sc->len && sc->s[sc->pos] == '\'')
            return scan_fail(sc, sc->pos, "single-quoted string");
        if (scan_comment_here(sc))
            return scan_fail(sc, sc->pos, "comment (JSON has none)");
        return scan_fail(sc, sc->pos, "expected a string");
    }
    *start = ++sc->pos;
    *escaped = false;
    while (sc->pos < sc->len) {
        unsigned char c = (unsigned char)sc->s[sc->pos];
        if (c == '"') {
            *end = sc->pos++;
            return 0;
        }
        if (c < 0x20)
            return scan_fail(sc, sc->pos, "control character in a string");
        if (c == '\\') {
            *escaped = true;
            sc->pos++;
            if (sc->pos >= sc->len)
                break;
            char e = sc->s[sc->pos];
            if (e == 'u') {
                for (int i = 1; i <= 4; i++) {
                    char h = sc->pos + i < sc->len ? sc->s[sc->pos + i] : 0;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') ||
                          (h >= 'A' && h <= 'F')))
                        return scan_fail(sc, sc->pos, "bad \\u escape");
                }
                sc->pos += 4;
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return scan_fail(sc, sc->pos - 1, "bad escape");
            }
        }
        sc->pos++;
    }
    return scan_fail(sc, sc->len, "unterminated string");
}

static int
scan_number(struct scan *sc)
{
    size_t p = sc->pos, at = p;
    const char *s = sc->s;
    if (p < sc->len && s[p] == '-')
        p++;
    if (p >= sc->len || !(s[p] >= '0' && s[p] <= '9'))
        return scan_fail(sc, at, "not a JSON number (NaN and Infinity are not JSON)");
    if (s[p] == '0')
        p++;
    else
        while (p < sc->len && s[p] >= '0' && s[p] <= '9')
            p++;
    if (p < sc->len && s[p] == '.') {
        p++;
        if (p >= sc->len || !(s[p] >= '0' && s[p] <= '9'))
            return scan_fail(sc, at, "a number needs digits after the point");
        while (p < sc->len && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (p < sc->len && (s[p] == 'e' || s[p] == 'E')) {
        p++;
        if (p < sc->len && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= sc->len || !(s[p] >= '0' && s[p] <= '9'))
            return scan_fail(sc, at, "a number needs digits in its exponent");
        while (p < sc->len && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    sc->pos = p;
    return 0;
}

static int
scan_literal(struct scan *sc, const char *word)
{
    size_t n = strlen(word);
    if (sc->len - sc->pos < n || memcmp(sc->s + sc->pos, word, n) != 0)
        return scan_fail(sc, sc->pos, "unexpected character");
    sc->pos += n;
    return 0;
}

/* A copy of n bytes of s (strndup, which mingw lacks). */
static char *
copy_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* The key as json-c decodes it (escapes resolved), for the duplicate check. */
static char *
key_text(const struct scan *sc, size_t start, size_t end, bool escaped)
{
    if (!escaped)
        return copy_n(sc->s + start, end - start);
    char *quoted = copy_n(sc->s + start - 1, end - start + 2);
    if (!quoted)
        return NULL;
    json_object *v = json_tokener_parse(quoted);
    free(quoted);
    char *r = v && json_object_is_type(v, json_type_string)
                  ? copy_n(json_object_get_string(v), (size_t)json_object_get_string_len(v))
                  : copy_n(sc->s + start, end - start);
    json_object_put(v);
    return r;
}

static void
key_free(struct lh_entry *e)
{
    free((void *)lh_entry_k(e));
}

static int
scan_object(struct scan *sc)
{
    sc->pos++; /* '{' */
    struct lh_table *keys = lh_kchar_table_new(16, key_free);
    if (!keys)
        return -ENOMEM;
    int ret = 0;
    scan_ws(sc);
    if (sc->pos < sc->len && sc->s[sc->pos] == '}') {
        sc->pos++;
        lh_table_free(keys);
        return 0;
    }
    for (;;) {
        scan_ws(sc);
        size_t at = sc->pos, start = 0, end = 0;
        bool escaped = false;
        if (sc->pos < sc->len && sc->s[sc->pos] == '}') {
            ret = scan_fail(sc, sc->pos, "trailing comma before '}'");
            break;
        }
        if ((ret = scan_string(sc, &start, &end, &escaped)) < 0)
            break;
        char *k = key_text(sc, start, end, escaped);
        if (!k) {
            ret = -ENOMEM;
            break;
        }
        if (lh_table_lookup_ex(keys, k, NULL)) {
            char q[JSONUTIL_QUOTE_MAX];
            ret = scan_fail(sc, at, "duplicate key %s", jsonutil_quote(q, k, strlen(k)));
            free(k);
            break;
        }
        if (lh_table_insert(keys, k, NULL) != 0) {
            free(k);
            ret = -ENOMEM;
            break;
        }
        scan_ws(sc);
        if (sc->pos >= sc->len || sc->s[sc->pos] != ':') {
            ret = scan_fail(sc, sc->pos, "expected ':'");
            break;
        }
        sc->pos++;
        if ((ret = scan_value(sc)) < 0)
            break;
        scan_ws(sc);
        if (sc->pos < sc->len && sc->s[sc->pos] == ',') {
            sc->pos++;
            continue;
        }
        if (sc->pos < sc->len && sc->s[sc->pos] == '}') {
            sc->pos++;
            break;
        }
        ret = scan_fail(sc, sc->pos,
                        scan_comment_here(sc) ? "comment (JSON has none)" : "expected ',' or '}'");
        break;
    }
    lh_table_free(keys);
    return ret;
}

static int
scan_array(struct scan *sc)
{
    sc->pos++; /* '[' */
    scan_ws(sc);
    if (sc->pos < sc->len && sc->s[sc->pos] == ']') {
        sc->pos++;
        return 0;
    }
    for (;;) {
        scan_ws(sc);
        if (sc->pos < sc->len && sc->s[sc->pos] == ']')
            return scan_fail(sc, sc->pos, "trailing comma before ']'");
        int ret = scan_value(sc);
        if (ret < 0)
            return ret;
        scan_ws(sc);
        if (sc->pos < sc->len && sc->s[sc->pos] == ',') {
            sc->pos++;
            continue;
        }
        if (sc->pos < sc->len && sc->s[sc->pos] == ']') {
            sc->pos++;
            return 0;
        }
        return scan_fail(sc, sc->pos,
                         scan_comment_here(sc) ? "comment (JSON has none)" : "expected ',' or ']'");
    }
}

static int
scan_value(struct scan *sc)
{
    scan_ws(sc);
    if (sc->pos >= sc->len)
        return scan_fail(sc, sc->pos, "unexpected end of input");
    if (++sc->depth > SCAN_DEPTH_MAX)
        return scan_fail(sc, sc->pos, "nested too deeply");
    int ret;
    size_t start, end;
    bool escaped;
    switch (sc->s[sc->pos]) {
    case '{':
        ret = scan_object(sc);
        break;
    case '[':
        ret = scan_array(sc);
        break;
    case '"':
    case '\'':
        ret = scan_string(sc, &start, &end, &escaped);
        break;
    case 't':
        ret = scan_literal(sc, "true");
        break;
    case 'f':
        ret = scan_literal(sc, "false");
        break;
    case 'n':
        ret = scan_literal(sc, "null");
        break;
    default:
        ret = scan_comment_here(sc) ? scan_fail(sc, sc->pos, "comment (JSON has none)")
                                    : scan_number(sc);
        break;
    }
    sc->depth--;
    return ret;
}

int
jsonutil_parse(const char *text, size_t len, json_object **out, struct jsonutil_syntax *syn)
{
    struct jsonutil_syntax ignored;
    if (!syn)
        syn = &ignored;
    memset(syn, 0, sizeof(*syn));
    *out = NULL;
    /* The scanner first: its messages name the rule broken. */
    struct scan sc = {.s = text, .len = len, .syn = syn};
    int ret = scan_value(&sc);
    if (ret == 0) {
        scan_ws(&sc);
        if (sc.pos < len)
            ret = scan_fail(&sc, sc.pos,
                            scan_comment_here(&sc) ? "comment (JSON has none)"
                                                   : "trailing data after the value");
    }
    if (ret < 0)
        return ret;
    /* Then json-c builds it, strict too (and keeps its own depth limit). */
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return -ENOMEM;
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (jerr != json_tokener_success) {
        json_object_put(obj);
        syn->truncated = jerr == json_tokener_continue;
        syn->offset = end;
        snprintf(syn->why, sizeof(syn->why), "%s", json_tokener_error_desc(jerr));
        return -EINVAL;
    }
    *out = obj;
    return 0;
}

int
jsonutil_parse_object(const char *text, size_t len, bool allow_empty, json_object **out,
                      struct err *err)
{
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\n' || text[i] == '\r' || text[i] == '\t'))
        i++;
    if (i == len) {
        if (!allow_empty)
            return err_set(err, EINVAL, "expected a JSON object, got nothing");
        *out = json_object_new_object();
        return *out ? 0 : err_set(err, ENOMEM, "out of memory");
    }
    struct jsonutil_syntax syn;
    json_object *obj = NULL;
    int ret = jsonutil_parse(text, len, &obj, &syn);
    if (ret == -ENOMEM)
        return err_set(err, ENOMEM, "out of memory");
    if (ret < 0 && syn.truncated)
        return err_set(err, EINVAL, "malformed JSON: unexpected end of input");
    if (ret < 0)
        return err_set(err, EINVAL, "malformed JSON at byte %zu: %s", syn.offset, syn.why);
    if (!json_object_is_type(obj, json_type_object)) {
        ret = err_set(err, EINVAL, "expected a JSON object, got %s", jsonutil_type_article(obj));
        json_object_put(obj);
        return ret;
    }
    *out = obj;
    return 0;
}
