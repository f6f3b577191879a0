// verify OUT IN: every 8032-byte frame of OUT equals the IN frame its VDIF header names, and the
// frames follow each other (IN looped). Prints a JSON line.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#define FRAME 8032
static const uint8_t *map(const char *p, size_t *n) {
    int fd = open(p, O_RDONLY); struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) { perror(p); exit(1); }
    *n = st.st_size;
    if (!*n) return NULL;
    void *m = mmap(NULL, *n, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) { perror("mmap"); exit(1); }
    madvise(m, *n, MADV_SEQUENTIAL);
    return m;
}
int main(int argc, char **argv) {
    size_t no, ni;
    const uint8_t *o = map(argv[1], &no), *in = map(argv[2], &ni);
    uint64_t nin = ni / FRAME, nout = no / FRAME;
    uint32_t w0, w1;
    memcpy(&w0, in, 4);
    uint32_t sec0 = w0 & 0x3fffffff;
    // frames per second: largest frame number in the input's first second + 1
    uint32_t fps = 0;
    for (uint64_t i = 0; i < nin; i++) { memcpy(&w0, in + i * FRAME, 4); memcpy(&w1, in + i * FRAME + 4, 4);
        if ((w0 & 0x3fffffff) != sec0) break;
        fps = (w1 & 0xffffff) + 1; }
    uint64_t prev = 0, gaps = 0, missing = 0, mismatch = 0, zero = 0, first = 0, bad_idx = 0;
    static const uint8_t zeros[FRAME];
    for (uint64_t k = 0; k < nout; k++) {
        const uint8_t *f = o + k * FRAME;
        if (!memcmp(f, zeros, FRAME)) { zero++; continue; }
        memcpy(&w0, f, 4); memcpy(&w1, f + 4, 4);
        uint64_t idx = (uint64_t)((w0 & 0x3fffffff) - sec0) * fps + (w1 & 0xffffff);
        // the sender re-stamps seconds when it loops: continuity on the full index, content
        // against the input frame idx % nin with word 0's seconds field masked
        if (k == 0) first = idx;
        else if (idx != prev + 1) { gaps++; if (idx > prev) missing += idx - prev - 1; else bad_idx++; }
        const uint8_t *g = in + (idx % nin) * FRAME;
        uint32_t g0; memcpy(&g0, g, 4);
        if ((g0 & 0xc0000000) != (w0 & 0xc0000000) || memcmp(f + 4, g + 4, FRAME - 4)) mismatch++;
        prev = idx;
    }
    printf("{\"out_frames\":%llu,\"tail_bytes\":%llu,\"first_idx\":%llu,\"gaps\":%llu,\"missing_by_gaps\":%llu,"
           "\"content_mismatch\":%llu,\"zero_frames\":%llu,\"bad_idx\":%llu,\"fps\":%u}\n",
           (unsigned long long)nout, (unsigned long long)(no % FRAME), (unsigned long long)first,
           (unsigned long long)gaps, (unsigned long long)missing, (unsigned long long)mismatch,
           (unsigned long long)zero, (unsigned long long)bad_idx, fps);
    return 0;
}
