/*
 * The registry client's transport: libcurl easy handles driven through a
 * multi handle of their own, so that the body of a response can be read
 * in pull mode by layer_unpack's read callback. The write callback fills
 * a bounded buffer and pauses the transfer when it is full; reading
 * unpauses it. A paused transfer is exempt from curl's low-speed check,
 * so a slow disk never looks like a stalled registry.
 *
 * Handle pairs (multi + easy) are kept in a small idle pool so that a
 * connection to a registry is reused by the next request, whichever
 * thread makes it; a pair is only ever used by one thread at a time (a
 * connection cache shared between threads is a known libcurl bug). DNS
 * and TLS sessions are shared through a CURLSH with locks.
 *
 * Redirects are not followed here (registry.c does it, so that it can
 * decide per hop which credentials and CA apply). Blocking; pool threads.
 */
#include "store/registry_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/cleanup.h"

#define STREAM_BUF (256 * 1024)
#define POOL_MAX 8
#define POLL_MS 100

struct reg_conn {
    CURLM *multi;
    CURL *easy;
    struct reg_conn *next;
};

struct reg_http {
    CURLSH *share;
    pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
    pthread_mutex_t pool_mu;
    struct reg_conn *idle;
    unsigned n_idle;
};

struct reg_stream {
    struct reg_http *h;
    struct reg_conn *conn;
    struct curl_slist *hdrs;
    struct reg_http_resp resp;
    char host[256];
    char range[32];
    struct reg_cancel cancel;
    bool headers_done, done, paused, added, cancelled;
    CURLcode result;
    char *buf;
    size_t off, len; /* buffered body bytes: buf[off, off + len) */
    int64_t received;
    char errbuf[CURL_ERROR_SIZE];
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void
global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void
share_lock(CURL *handle, curl_lock_data data, curl_lock_access access, void *ctx)
{
    struct reg_http *h = ctx;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST)
        pthread_mutex_lock(&h->share_mu[data]);
}

static void
share_unlock(CURL *handle, curl_lock_data data, void *ctx)
{
    struct reg_http *h = ctx;
    if (data >= 0 && data < CURL_LOCK_DATA_LAST)
        pthread_mutex_unlock(&h->share_mu[data]);
}

struct reg_http *
reg_http_new(struct err *err)
{
    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK) {
        err_set(err, ERR_UNAVAILABLE, "libcurl: %s", curl_easy_strerror(global_rc));
        return NULL;
    }
    struct reg_http *h = calloc(1, sizeof(*h));
    if (!h) {
        err_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_init(&h->share_mu[i], NULL);
    pthread_mutex_init(&h->pool_mu, NULL);
    if (!(h->share = curl_share_init())) {
        reg_http_free(h);
        err_set(err, ENOMEM, "libcurl: cannot create a share handle");
        return NULL;
    }
    curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return h;
}

static void
conn_free(struct reg_conn *c)
{
    if (!c)
        return;
    if (c->easy)
        curl_easy_cleanup(c->easy);
    if (c->multi)
        curl_multi_cleanup(c->multi);
    free(c);
}

void
reg_http_free(struct reg_http *h)
{
    if (!h)
        return;
    while (h->idle) {
        struct reg_conn *c = h->idle;
        h->idle = c->next;
        conn_free(c);
    }
    if (h->share)
        curl_share_cleanup(h->share);
    for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
        pthread_mutex_destroy(&h->share_mu[i]);
    pthread_mutex_destroy(&h->pool_mu);
    free(h);
}

static struct reg_conn *
conn_get(struct reg_http *h)
{
    pthread_mutex_lock(&h->pool_mu);
    struct reg_conn *c = h->idle;
    if (c) {
        h->idle = c->next;
        h->n_idle--;
    }
    pthread_mutex_unlock(&h->pool_mu);
    if (c) {
        curl_easy_reset(c->easy);
        return c;
    }
    c = calloc(1, sizeof(*c));
    if (!c || !(c->multi = curl_multi_init()) || !(c->easy = curl_easy_init())) {
        conn_free(c);
        return NULL;
    }
    return c;
}

static void
conn_put(struct reg_http *h, struct reg_conn *c)
{
    pthread_mutex_lock(&h->pool_mu);
    if (h->n_idle < POOL_MAX) {
        c->next = h->idle;
        h->idle = c;
        h->n_idle++;
        c = NULL;
    }
    pthread_mutex_unlock(&h->pool_mu);
    conn_free(c);
}

/* ---- callbacks ---------------------------------------------------------- */

static void
resp_clear(struct reg_http_resp *r)
{
    free(r->www_authenticate);
    free(r->location);
    free(r->content_type);
    free(r->docker_digest);
    memset(r, 0, sizeof(*r));
    r->content_length = -1;
    r->range_start = -1;
    r->retry_after_s = -1;
}

static char *
dup_trimmed(const char *p, size_t n)
{
    while (n && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return strndup(p, n);
}

static bool
header_is(const char *line, size_t n, const char *name, const char **value, size_t *vlen)
{
    size_t k = strlen(name);
    if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
        return false;
    *value = line + k + 1;
    *vlen = n - k - 1;
    return true;
}

static size_t
header_cb(char *line, size_t size, size_t nitems, void *ud)
{
    struct reg_stream *s = ud;
    size_t n = size * nitems;
    if (n >= 5 && strncmp(line, "HTTP/", 5) == 0) {
        /* A new header block (after a 100 Continue, say): start over. */
        resp_clear(&s->resp);
        s->headers_done = false;
        char status[64];
        size_t k = n < sizeof(status) - 1 ? n : sizeof(status) - 1;
        memcpy(status, line, k);
        status[k] = '\0';
        const char *sp = strchr(status, ' ');
        s->resp.status = sp ? strtol(sp + 1, NULL, 10) : 0;
        return n;
    }
    if ((n == 2 && line[0] == '\r') || (n == 1 && line[0] == '\n')) {
        if (s->resp.status >= 200)
            s->headers_done = true;
        return n;
    }
    const char *v;
    size_t vl;
    char **slot = NULL;
    if (header_is(line, n, "WWW-Authenticate", &v, &vl)) {
        if (!s->resp.www_authenticate)
            slot = &s->resp.www_authenticate;
    } else if (header_is(line, n, "Location", &v, &vl)) {
        slot = &s->resp.location;
    } else if (header_is(line, n, "Content-Type", &v, &vl)) {
        slot = &s->resp.content_type;
    } else if (header_is(line, n, "Docker-Content-Digest", &v, &vl)) {
        slot = &s->resp.docker_digest;
    } else if (header_is(line, n, "Content-Length", &v, &vl)) {
        cleanup_free char *t = dup_trimmed(v, vl);
        if (t)
            s->resp.content_length = strtoll(t, NULL, 10);
    } else if (header_is(line, n, "Content-Range", &v, &vl)) {
        cleanup_free char *t = dup_trimmed(v, vl);
        long long start;
        if (t && sscanf(t, "bytes %lld-", &start) == 1)
            s->resp.range_start = start;
    } else if (header_is(line, n, "Retry-After", &v, &vl)) {
        cleanup_free char *t = dup_trimmed(v, vl);
        char *end = NULL;
        long secs = t ? strtol(t, &end, 10) : -1;
        if (t && end != t && *end == '\0' && secs >= 0)
            s->resp.retry_after_s = secs;
    }
    if (slot) {
        free(*slot);
        *slot = dup_trimmed(v, vl);
    }
    return n;
}

static size_t
write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    struct reg_stream *s = ud;
    size_t n = size * nmemb;
    if (s->off + s->len + n > STREAM_BUF && s->off) {
        memmove(s->buf, s->buf + s->off, s->len);
        s->off = 0;
    }
    if (s->len + n > STREAM_BUF) {
        s->paused = true;
        return CURL_WRITEFUNC_PAUSE;
    }
    memcpy(s->buf + s->off + s->len, data, n);
    s->len += n;
    s->received += (int64_t)n;
    return n;
}

static int
xfer_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    struct reg_stream *s = ud;
    if (s->cancel.fn && s->cancel.fn(s->cancel.ctx)) {
        s->cancelled = true;
        return 1;
    }
    return 0;
}

/* ---- driving the transfer ----------------------------------------------- */

/* Failures worth another attempt: the server or the path to it may come
 * back. A certificate that does not verify or a name that does not
 * resolve will not. */
static bool
retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

bool
reg_stream_retryable(const struct reg_stream *s)
{
    return !s->cancelled && retryable(s->result);
}

static int
transport_error(struct reg_stream *s, struct err *err)
{
    CURLcode rc = s->result;
    const char *why = s->errbuf[0] ? s->errbuf : curl_easy_strerror(rc);
    if (s->cancelled || rc == CURLE_ABORTED_BY_CALLBACK)
        return err_set(err, ECANCELED, "%s: cancelled", s->host);
    if (rc == CURLE_OPERATION_TIMEDOUT)
        return err_set(err, ERR_GATEWAY_TIMEOUT, "%s: did not answer in time (%s)", s->host, why);
    return err_set(err, ERR_BAD_GATEWAY, "%s: %s", s->host, why);
}

/* One step of the transfer: unpause if there is room, perform, and wait a
 * little when nothing happened. */
static int
pump(struct reg_stream *s, struct err *err)
{
    if (s->done)
        return 0;
    if (s->cancel.fn && s->cancel.fn(s->cancel.ctx)) {
        s->cancelled = true;
        s->done = true;
        s->result = CURLE_ABORTED_BY_CALLBACK;
        return transport_error(s, err);
    }
    if (s->paused && s->len + CURL_MAX_WRITE_SIZE <= STREAM_BUF) {
        s->paused = false;
        curl_easy_pause(s->conn->easy, CURLPAUSE_CONT);
    }
    size_t before = s->len;
    bool headers_before = s->headers_done;
    int running = 0;
    CURLMcode mc = curl_multi_perform(s->conn->multi, &running);
    if (mc != CURLM_OK)
        return err_set(err, ERR_BAD_GATEWAY, "%s: %s", s->host, curl_multi_strerror(mc));
    int left;
    CURLMsg *msg;
    while ((msg = curl_multi_info_read(s->conn->multi, &left))) {
        if (msg->msg == CURLMSG_DONE) {
            s->done = true;
            s->result = msg->data.result;
        }
    }
    if (!s->done && s->len == before && s->headers_done == headers_before && !s->paused) {
        mc = curl_multi_poll(s->conn->multi, NULL, 0, POLL_MS, NULL);
        if (mc != CURLM_OK)
            return err_set(err, ERR_BAD_GATEWAY, "%s: %s", s->host, curl_multi_strerror(mc));
    }
    return 0;
}

int
reg_stream_open(struct reg_http *h, const struct reg_http_req *req, const char *host,
                struct reg_stream **out, bool *can_retry, struct err *err)
{
    *can_retry = false;
    struct reg_stream *s = calloc(1, sizeof(*s));
    if (!s || !(s->buf = malloc(STREAM_BUF))) {
        free(s);
        return err_set(err, ENOMEM, "out of memory");
    }
    s->h = h;
    s->cancel = req->cancel;
    resp_clear(&s->resp);
    snprintf(s->host, sizeof(s->host), "%s", host);
    if (!(s->conn = conn_get(h))) {
        reg_stream_close(s);
        return err_set(err, ENOMEM, "libcurl: cannot create a handle");
    }
    for (const char *const *hd = req->headers; hd && *hd; hd++) {
        struct curl_slist *l = curl_slist_append(s->hdrs, *hd);
        if (!l) {
            reg_stream_close(s);
            return err_set(err, ENOMEM, "out of memory");
        }
        s->hdrs = l;
    }
    CURL *e = s->conn->easy;
    curl_easy_setopt(e, CURLOPT_URL, req->url);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_SHARE, h->share);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "berth/" BERTH_VERSION);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->hdrs);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)req->connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)req->low_speed_time_s);
    if (req->total_timeout_ms)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)req->total_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, s->errbuf);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, s);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, xfer_cb);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, s);
    if (req->ca_file)
        curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file);
    if (req->range_from > 0) {
        snprintf(s->range, sizeof(s->range), "%lld-", (long long)req->range_from);
        curl_easy_setopt(e, CURLOPT_RANGE, s->range);
    }
    if (strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->post_body ? req->post_body : "");
    }
    if (curl_multi_add_handle(s->conn->multi, e) != CURLM_OK) {
        reg_stream_close(s);
        return err_set(err, ENOMEM, "libcurl: cannot start a transfer");
    }
    s->added = true;
    while (!s->headers_done && !s->done) {
        int rc = pump(s, err);
        if (rc < 0) {
            reg_stream_close(s);
            return rc;
        }
    }
    /* A failure after the headers is the body's: reading reports it once
     * the bytes that did arrive are handed out (a resume starts there). */
    if (!s->headers_done && s->result != CURLE_OK) {
        int rc = transport_error(s, err);
        *can_retry = reg_stream_retryable(s);
        reg_stream_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

const struct reg_http_resp *
reg_stream_resp(const struct reg_stream *s)
{
    return &s->resp;
}

int64_t
reg_stream_received(const struct reg_stream *s)
{
    return s->received;
}

ssize_t
reg_stream_read(struct reg_stream *s, void *buf, size_t len, struct err *err)
{
    while (s->len == 0 && !s->done) {
        int rc = pump(s, err);
        if (rc < 0)
            return rc;
    }
    if (s->len > 0) {
        size_t n = len < s->len ? len : s->len;
        memcpy(buf, s->buf + s->off, n);
        s->off += n;
        s->len -= n;
        if (s->len == 0)
            s->off = 0;
        return (ssize_t)n;
    }
    if (s->result != CURLE_OK)
        return transport_error(s, err);
    return 0;
}

int
reg_stream_read_all(struct reg_stream *s, size_t max, char **out, size_t *len, struct err *err)
{
    size_t cap = 4096, got = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return err_set(err, ENOMEM, "out of memory");
    for (;;) {
        if (got == cap) {
            if (cap >= max + 1) {
                free(b);
                return err_set(err, EFBIG, "%s: the answer is over %zu bytes", s->host, max);
            }
            cap = cap * 2 > max + 1 ? max + 1 : cap * 2;
            char *nb = realloc(b, cap + 1);
            if (!nb) {
                free(b);
                return err_set(err, ENOMEM, "out of memory");
            }
            b = nb;
        }
        ssize_t n = reg_stream_read(s, b + got, cap - got, err);
        if (n < 0) {
            free(b);
            return (int)n;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got > max) {
            free(b);
            return err_set(err, EFBIG, "%s: the answer is over %zu bytes", s->host, max);
        }
    }
    b[got] = '\0';
    *out = b;
    if (len)
        *len = got;
    return 0;
}

void
reg_stream_close(struct reg_stream *s)
{
    if (!s)
        return;
    if (s->conn) {
        if (s->added)
            curl_multi_remove_handle(s->conn->multi, s->conn->easy);
        /* Detach what belongs to the stream before the handle is pooled. */
        curl_easy_setopt(s->conn->easy, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(s->conn->easy, CURLOPT_ERRORBUFFER, NULL);
        conn_put(s->h, s->conn);
    }
    curl_slist_free_all(s->hdrs);
    resp_clear(&s->resp);
    free(s->buf);
    free(s);
}

/* ---- URLs --------------------------------------------------------------- */

int
reg_url_origin(const char *url, char **out, char **host_port)
{
    CURLU *u = curl_url();
    if (!u)
        return -ENOMEM;
    char *scheme = NULL, *host = NULL, *port = NULL, *given_port = NULL;
    int rc = -EINVAL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK)
        goto out;
    if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)
        goto out;
    curl_url_get(u, CURLUPART_PORT, &given_port, 0);
    rc = -ENOMEM;
    if (out && asprintf(out, "%s://%s:%s", scheme, host, port) < 0)
        goto out;
    if (host_port && asprintf(host_port, "%s%s%s", host, given_port ? ":" : "",
                              given_port ? given_port : "") < 0) {
        if (out)
            free(*out);
        goto out;
    }
    rc = 0;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(given_port);
    curl_url_cleanup(u);
    return rc;
}

char *
reg_url_resolve(const char *base, const char *location)
{
    CURLU *u = curl_url();
    if (!u)
        return NULL;
    char *s = NULL, *res = NULL;
    if (curl_url_set(u, CURLUPART_URL, base, 0) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_URL, location, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
        res = strdup(s);
    curl_free(s);
    curl_url_cleanup(u);
    return res;
}

char *
reg_url_escape(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0);
    char *res = e ? strdup(e) : NULL;
    curl_free(e);
    return res;
}
