/*
 * shm_client.c - plain-C client of `usbeam serve`: publish parameters for Vantage-layout
 * frames, push frames, read the images back.  Build and run (server first):
 *
 *   make client
 *   cc -std=c11 -Icsrc/shm examples/shm_client.c -Lbuild -lusbeam_client -Wl,-rpath,$PWD/build -o shm_client
 *   python -m usbeam serve --name /usbeam &
 *   ./shm_client /usbeam 10
 *
 * Frames: int16, ROWS x CHANNELS, column-major (as a Vantage RcvData frame); element e is
 * wired to channel (e * 7) % CHANNELS; two acquisitions of SAMPLES samples.  With the
 * default passthrough pipeline the image is the mapped frame, checked here.
 */
#include "usbeam_client.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 256, CHANNELS = 32, ELEMENTS = 16, ACQ = 2, SAMPLES = 100 };

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "/usbeam";
    int n_frames = argc > 2 ? atoi(argv[2]) : 10;
    usbeam_client *c = usbeam_client_open(name, 5000);
    if (!c) {
        fprintf(stderr, "open: %s\n", usbeam_client_last_error());
        return 1;
    }
    char params[2048];
    int len = snprintf(params, sizeof params,
                       "{\"frame\": {\"shape\": [%d, %d], \"dtype\": \"int16\", \"order\": \"F\"}, "
                       "\"channel_map\": {\"element_channel\": [", ROWS, CHANNELS);
    for (int e = 0; e < ELEMENTS; ++e)
        len += snprintf(params + len, sizeof params - (size_t)len, "%s%d", e ? ", " : "", (e * 7) % CHANNELS);
    snprintf(params + len, sizeof params - (size_t)len, "], \"acquisition_row\": [0, 128], \"n_samples\": %d}}",
             SAMPLES);
    if (usbeam_client_set_params(c, params) != USBEAM_CLIENT_OK) {
        fprintf(stderr, "set_params: %s\n", usbeam_client_last_error());
        return 1;
    }
    static int16_t frame[CHANNELS * ROWS]; /* column-major: frame[channel * ROWS + row] */
    static int16_t image[ACQ * ELEMENTS * SAMPLES];
    int bad = 0;
    double latency = 0;
    for (int k = 0; k < n_frames; ++k) {
        for (int ch = 0; ch < CHANNELS; ++ch)
            for (int r = 0; r < ROWS; ++r) frame[ch * ROWS + r] = (int16_t)(k * 1000 + ch * 17 + r);
        unsigned long long id;
        if (usbeam_client_push(c, frame, sizeof frame, 1000, &id) != USBEAM_CLIENT_OK) {
            fprintf(stderr, "push: %s\n", usbeam_client_last_error());
            return 1;
        }
        usbeam_client_result info;
        int st = usbeam_client_get_result(c, id, image, sizeof image, 5000, &info);
        if (st != USBEAM_CLIENT_OK) {
            fprintf(stderr, "frame %llu: %s\n", id, usbeam_client_last_error());
            return 1;
        }
        for (int a = 0; a < ACQ; ++a)
            for (int e = 0; e < ELEMENTS; ++e)
                for (int s = 0; s < SAMPLES; ++s) {
                    int ch = (e * 7) % CHANNELS, row = a * 128 + s;
                    bad += image[(a * ELEMENTS + e) * SAMPLES + s] != (int16_t)(k * 1000 + ch * 17 + row);
                }
        latency += info.latency_s;
    }
    usbeam_client_info info;
    usbeam_client_info_get(c, &info);
    printf("%d frames, %d wrong samples, mean latency %.3f ms, server processed %llu\n", n_frames, bad,
           1e3 * latency / n_frames, info.processed);
    usbeam_client_close(c);
    return bad != 0;
}
