/*
 * usbeam_client.h - the C client of a `usbeam serve` beamforming process.
 *
 * Plain C with only basic types, so that MATLAB (loadlibrary/calllib, or a MEX file),
 * Python (ctypes) and C programs can all use libusbeam_client.so (`make client`).
 *
 *   usbeam_client *c = usbeam_client_open("/usbeam", 2000);
 *   usbeam_client_set_params(c, "{\"c\": 1540, ...}");          JSON, server-defined keys
 *   usbeam_client_push(c, rcvdata, bytes, 100, &frame_id);      e.g. one Vantage RcvData frame:
 *                                                                int16 rows x channels, column-major
 *   usbeam_client_get_result(c, frame_id, image, image_bytes, 100, &info);
 *   usbeam_client_close(c);
 *
 * Every function returns a status (USBEAM_CLIENT_OK = 0); on failure
 * usbeam_client_last_error() gives a message for the calling thread.  One client handle
 * is for one thread at a time; several processes may be clients of one server.
 * Timeouts are in milliseconds; 0 means "do not wait", < 0 means "wait indefinitely".
 */
#ifndef USBEAM_CLIENT_H
#define USBEAM_CLIENT_H

#ifdef __cplusplus
extern "C" {
#endif

enum usbeam_client_status {
    USBEAM_CLIENT_OK = 0,
    USBEAM_CLIENT_ERR_ARGUMENT = 1,     /* bad argument (NULL, size, unknown frame id) */
    USBEAM_CLIENT_ERR_SYSTEM = 2,       /* shm_open/mmap/lock failure (errno in the message) */
    USBEAM_CLIENT_ERR_LAYOUT = 3,       /* region has another magic, layout version or header size */
    USBEAM_CLIENT_ERR_TIMEOUT = 4,      /* nothing happened within the timeout */
    USBEAM_CLIENT_ERR_DROPPED = 5,      /* the frame was dropped under overload (drop_oldest) */
    USBEAM_CLIENT_ERR_REJECTED = 6,     /* the server refused the frame (size/parameters) */
    USBEAM_CLIENT_ERR_FAILED = 7,       /* the server's pipeline failed on the frame */
    USBEAM_CLIENT_ERR_EVICTED = 8,      /* the result was overwritten by a newer one */
    USBEAM_CLIENT_ERR_SERVER_GONE = 9,  /* no server process serves the region any more */
    USBEAM_CLIENT_ERR_TOO_LARGE = 10,   /* frame or parameters larger than the region allows */
    USBEAM_CLIENT_ERR_ABANDONED = 11    /* the frame's writer died or passed the write timeout */
};

typedef struct usbeam_client usbeam_client;

/* Outcome of one frame (filled by usbeam_client_get_result / _latest). */
typedef struct usbeam_client_result {
    unsigned long long frame_id;
    unsigned long long bytes;      /* bytes of the image copied into out */
    int status;                    /* usbeam_client_status of this frame */
    int dtype;                     /* usbeam_dtype: 0 int16, 1 float32, 2 complex64, 3 uint8, ... */
    int ndim;
    int reserved;
    unsigned long long shape[4];   /* C order (row-major): MATLAB sees the reversed order */
    double latency_s;              /* push start to result posted */
    char message[256];
} usbeam_client_result;

typedef struct usbeam_client_info {
    unsigned int layout_version;
    unsigned int n_slots, n_results;
    unsigned int policy;           /* 0 drop_oldest, 1 block */
    unsigned long long slot_capacity, result_capacity;
    int server_pid;
    int server_running;
    unsigned long long pushed, dropped, rejected, abandoned, processed, failed;
    unsigned long long stalled;    /* abandoned frames whose writer was alive (slot quarantined) */
    unsigned long long discarded;  /* late commits of those, refused */
} usbeam_client_info;

/* Attach to the region `name` (e.g. "/usbeam"), waiting up to timeout_ms for a server
 * to publish it.  Returns NULL on failure (see usbeam_client_last_error). */
usbeam_client *usbeam_client_open(const char *name, int timeout_ms);
int usbeam_client_close(usbeam_client *client);   /* safe on NULL */

const char *usbeam_client_last_error(void);
const char *usbeam_client_status_string(int status);

int usbeam_client_info_get(usbeam_client *client, usbeam_client_info *info);

/* Publish a new parameter set (JSON object text).  Frames pushed after this call are
 * processed with it; the server builds the new plan aside and swaps it in.  Frames
 * pushed before keep theirs (the region keeps the last 8 sets; a frame whose set was
 * overwritten before the server took it is REJECTED). */
int usbeam_client_set_params(usbeam_client *client, const char *json);

/* Copy one frame of `bytes` bytes into a free slot and hand it to the server. */
int usbeam_client_push(usbeam_client *client, const void *frame, unsigned long long bytes,
                       int timeout_ms, unsigned long long *frame_id);

/* Zero-copy push for C callers: reserve a slot and write into *data yourself (up to
 * *capacity bytes), then commit (or abort).  A client that dies between begin and
 * commit loses the slot to the server's reaper, never the server.  One that takes
 * longer than the server's write timeout loses the frame: the server posts it
 * ABANDONED and quarantines the slot until this commit (which then returns
 * USBEAM_CLIENT_ERR_ABANDONED and frees the slot) or abort. */
int usbeam_client_push_begin(usbeam_client *client, int timeout_ms, void **data,
                             unsigned long long *capacity, unsigned long long *frame_id);
int usbeam_client_push_commit(usbeam_client *client, unsigned long long frame_id,
                              unsigned long long bytes);
int usbeam_client_push_abort(usbeam_client *client, unsigned long long frame_id);

/* Wait for frame_id's result and copy its image into out (capacity bytes).  The status
 * of the frame is returned (OK, DROPPED, REJECTED, FAILED, ABANDONED, EVICTED, TIMEOUT, ...). */
int usbeam_client_get_result(usbeam_client *client, unsigned long long frame_id, void *out,
                             unsigned long long capacity, int timeout_ms,
                             usbeam_client_result *result);

/* The newest successfully processed frame with an id > after_id (0: any). */
int usbeam_client_latest(usbeam_client *client, unsigned long long after_id, void *out,
                         unsigned long long capacity, int timeout_ms,
                         usbeam_client_result *result);

#ifdef __cplusplus
}
#endif
#endif /* USBEAM_CLIENT_H */
