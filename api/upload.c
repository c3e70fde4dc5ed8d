/* Request bodies into upload pipes (api/upload.h). Loop thread. */
#include "api/upload.h"

#include "api/request.h"
#include "daemon/bpipe.h"

static size_t
upload_data(struct api_req *req, const char *data, size_t len)
{
    struct bpipe *p = req->upload;
    if (!p)
        return len;
    if (len == 0) {
        bpipe_close_write(p);
        if (req->upload_ended)
            req->upload_ended(req);
        else if (!req->response)
            api_req_suspend(req); /* the answer comes with the job's end */
        return 0;
    }
    if (req->response || bpipe_aborted(p))
        return len; /* answered already: read and drop the rest */
    size_t took = bpipe_write_nb(p, data, len);
    if (took < len)
        api_req_suspend(req); /* resumed by api_upload_room */
    return took;
}

void
api_upload_attach(struct api_req *req, struct bpipe *pipe, void (*ended)(struct api_req *req))
{
    req->upload = pipe;
    req->upload_ended = ended;
    req->stream_data = upload_data;
}

void
api_upload_room(struct api_req *req)
{
    if (req->suspended && !req->response && !req->body_ended)
        api_req_resume(req);
}
