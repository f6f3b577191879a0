// Receiver variants for the "recorder floor" measurement (issue 30): what receiving 8 KB VDIF
// datagrams and writing them to a file can cost at least on this host, apart from evlbi.
//   rx MODE PORT OUTFILE [COUNTFILE]        (run by bench/recv_floor.sh; env NAP_US=1000 as evlbi)
// MODE: m   receive only, nothing written (the receive floor)
//       a1  recvmmsg -> memcpy into 1 MiB buffer -> write(), one thread
//       a2  same, write() in a second thread fed by a queue of 32 buffers
//       b   recvmmsg 2 iovecs: 8-byte header to an array, 8032 bytes straight into the mmap'd file;
//           file grown by ftruncate in 64 MiB steps ahead; no pre-faulting; receiver munmaps behind
//       c   b + a second thread: grows, pre-faults 128 MiB ahead (MADV_POPULATE_WRITE, fallback
//           touch), munmaps 256 MiB windows behind
//       d   b + a separate process (forked before the socket) that maps the same file and grows /
//           pre-faults ahead in ITS OWN mapping; the receiver munmaps behind in its own mapping
//       ct  c with the pre-fault done by touching one byte per 4 KiB page (no madvise)
//       a3  recvmmsg scatters each frame straight into the write buffer (2 iovecs), write(), one thread
// COUNTFILE (optional): a small file the receiver publishes its frame count in after every batch
// (for the SIGKILL test).
// Prints one JSON line on stdout at the end.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define FRAME 8032
#define HDR 8
#define DGRAM (FRAME + HDR)
#define BATCHMAX 256
static int BATCH = 64;
static int NAP_US = 0;
#define STEP (64ull << 20)   // grow step
#define AHEAD (128ull << 20) // pre-fault distance ahead of the receiver
#define WIN (256ull << 20)   // munmap granularity behind
#define VA (256ull << 30)    // virtual reservation for the file mapping
#define BUFCAP 128           // frames per ~1 MiB write buffer (128 * 8032 = 1028096)
#define NBUF 32

static void die(const char *m) { perror(m); exit(1); }
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

struct tstat { uint64_t ns; long nvcsw, nivcsw, minflt; };
static void thread_stat(struct tstat *s) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long ns = 0;
    if (!f || fscanf(f, "%llu", &ns) != 1) die("schedstat");
    fclose(f);
    s->ns = ns;
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    s->nvcsw = ru.ru_nvcsw;
    s->nivcsw = ru.ru_nivcsw;
    s->minflt = ru.ru_minflt;
}

// Shared between receiver and helper (thread or process).
struct shared {
    _Atomic uint64_t pos;   // bytes of the file the receiver has filled (frames * FRAME)
    _Atomic uint64_t fsize; // file size
    _Atomic int done;
    pthread_mutex_t grow;   // serialises ftruncate (process-shared for d)
    struct tstat helper;    // helper's own CPU at its end
    uint64_t populated, unmaps, populate_calls, touch_fallback;
    _Atomic uint64_t count_pub; // frames, for the SIGKILL test (also mirrored to COUNTFILE)
};

static int sock, fd;
static char *base;
static struct shared *sh;
static const char *mode;
static const char *outpath;
static int use_touch;

static void grow_to(int f, uint64_t need) {
    pthread_mutex_lock(&sh->grow);
    uint64_t fs = atomic_load(&sh->fsize);
    if (fs < need) {
        while (fs < need) fs += STEP;
        if (ftruncate(f, fs) < 0) die("ftruncate");
        atomic_store(&sh->fsize, fs);
    }
    pthread_mutex_unlock(&sh->grow);
}

static void populate(char *p, uint64_t len) {
    if (!use_touch) {
        if (madvise(p, len, MADV_POPULATE_WRITE) == 0) { sh->populate_calls++; return; }
        if (errno != EINVAL) die("madvise");
        sh->touch_fallback = 1;
    }
    for (uint64_t o = 0; o < len; o += 4096) ((volatile char *)p)[o] = 0;
}

// Helper loop for c (thread, same mapping) and d (process, own mapping `b`, own fd `f`).
static void helper_loop(int f, char *b) {
    uint64_t populated = 0, unmapped = 0;
    for (;;) {
        int done = atomic_load(&sh->done);
        uint64_t p = atomic_load(&sh->pos);
        uint64_t target = p + AHEAD;
        while (!done && populated < target) {
            grow_to(f, populated + STEP);
            populate(b + populated, STEP);
            populated += STEP;
        }
        while (unmapped + WIN <= p) {
            if (munmap(b + unmapped, WIN) < 0) die("munmap helper");
            unmapped += WIN;
            sh->unmaps++;
        }
        if (done) break;
        usleep(2000);
    }
    sh->populated = populated;
    thread_stat(&sh->helper);
}
static void *helper_thread(void *arg) { (void)arg; helper_loop(fd, base); return NULL; }

// a2 queue
static char *bufs[NBUF];
static int qfull[NBUF], qfree[NBUF];
static size_t qfull_len[NBUF];
static int nfull_h, nfull_t, nfree_h, nfree_t; // ring indices (counts mod NBUF*2 avoided: use counters)
static unsigned long nfull, nfree;
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qc_full = PTHREAD_COND_INITIALIZER, qc_free = PTHREAD_COND_INITIALIZER;
static struct tstat writer_stat;
static unsigned long writer_waits, rx_waits;

static void write_all(int f, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(f, p, n);
        if (w < 0) { if (errno == EINTR) continue; die("write"); }
        p += w; n -= w;
    }
}
static void *writer_thread(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&qm);
        while (nfull == 0) { writer_waits++; pthread_cond_wait(&qc_full, &qm); }
        int i = qfull[nfull_h]; size_t len = qfull_len[nfull_h];
        nfull_h = (nfull_h + 1) % NBUF; nfull--;
        pthread_mutex_unlock(&qm);
        if (i < 0) break;
        write_all(fd, bufs[i], len);
        pthread_mutex_lock(&qm);
        qfree[nfree_t] = i; nfree_t = (nfree_t + 1) % NBUF; nfree++;
        pthread_cond_signal(&qc_free);
        pthread_mutex_unlock(&qm);
    }
    thread_stat(&writer_stat);
    return NULL;
}
static void push_full(int i, size_t len) {
    pthread_mutex_lock(&qm);
    qfull[nfull_t] = i; qfull_len[nfull_t] = len; nfull_t = (nfull_t + 1) % NBUF; nfull++;
    pthread_cond_signal(&qc_full);
    pthread_mutex_unlock(&qm);
}
static int pop_free(void) {
    pthread_mutex_lock(&qm);
    while (nfree == 0) { rx_waits++; pthread_cond_wait(&qc_free, &qm); }
    int i = qfree[nfree_h]; nfree_h = (nfree_h + 1) % NBUF; nfree--;
    pthread_mutex_unlock(&qm);
    return i;
}

static long udp_drops(int port) {
    FILE *f = fopen("/proc/net/udp", "r");
    char line[512];
    long drops = -1;
    if (!f) return -1;
    char want[32];
    snprintf(want, sizeof want, ":%04X ", port);
    while (fgets(line, sizeof line, f)) {
        char *la = strchr(line, ':');
        if (!la) continue;
        // local_address is the 2nd field: "0100007F:PORT"
        char *sp = strstr(line, want);
        if (sp && sp < line + 40) {
            char *last = strrchr(line, ' ');
            while (last && last > line && (last[1] == '\n' || last[1] == 0)) { *last = 0; last = strrchr(line, ' '); }
            drops = atol(last ? last + 1 : "0");
        }
    }
    fclose(f);
    return drops;
}

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: rx MODE PORT OUTFILE [COUNTFILE]\n"); return 2; }
    mode = argv[1];
    int port = atoi(argv[2]);
    outpath = argv[3];
    const char *countpath = argc > 4 ? argv[4] : NULL;
    int A1 = !strcmp(mode, "a1"), A2 = !strcmp(mode, "a2"), B = !strcmp(mode, "b"), C = !strcmp(mode, "c"),
        D = !strcmp(mode, "d"), CT = !strcmp(mode, "ct");
    if (CT) { C = 1; use_touch = 1; }
    if (!(A1 || A2 || B || C || D || !strcmp(mode, "m") || !strcmp(mode, "a3"))) { fprintf(stderr, "bad mode\n"); return 2; }
    int M = !strcmp(mode, "m");
    int A3 = !strcmp(mode, "a3"); // recvmmsg scatters frames straight into the write buffer, then write()
    if (M) A1 = 1; // memory sink: like a1 without memcpy/write
    int MM = B || C || D;
    if (getenv("BATCH")) BATCH = atoi(getenv("BATCH"));
    if (getenv("NAP_US")) NAP_US = atoi(getenv("NAP_US"));
    if (BATCH > BATCHMAX) BATCH = BATCHMAX;

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) die("mmap shared");
    memset(sh, 0, sizeof *sh);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->grow, &ma);

    fd = open(outpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("open out");
    int *countmap = NULL;
    if (countpath) {
        int cf = open(countpath, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (cf < 0 || ftruncate(cf, 4096) < 0) die("countfile");
        countmap = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cf, 0);
        if (countmap == MAP_FAILED) die("mmap count");
    }

    pid_t child = 0;
    if (D) {
        child = fork();
        if (child < 0) die("fork");
        if (child == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int f = open(outpath, O_RDWR);
            if (f < 0) die("child open");
            char *b = mmap(NULL, VA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, f, 0);
            if (b == MAP_FAILED) die("child mmap");
            helper_loop(f, b);
            _exit(0);
        }
    }

    sock = socket(AF_INET, SOCK_DGRAM, 0);
    if (sock < 0) die("socket");
    int rcvbuf = 64 << 20;
    if (setsockopt(sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0) die("SO_RCVBUFFORCE");
    struct timeval tv = {0, 100000};
    setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(0x7f000001)};
    if (bind(sock, (struct sockaddr *)&a, sizeof a) < 0) die("bind");

    struct mmsghdr m[BATCHMAX];
    struct iovec iov[BATCHMAX][2];
    uint64_t hdr[BATCHMAX];
    char *rb = NULL;
    memset(m, 0, sizeof m);
    if (A1 || A2) {
        rb = aligned_alloc(4096, BATCHMAX * DGRAM + 4096);
        memset(rb, 0, BATCH * DGRAM);
        for (int i = 0; i < BATCH; i++) {
            iov[i][0].iov_base = rb + (size_t)i * DGRAM;
            iov[i][0].iov_len = DGRAM;
            m[i].msg_hdr.msg_iov = iov[i];
            m[i].msg_hdr.msg_iovlen = 1;
        }
        for (int i = 0; i < NBUF; i++) {
            bufs[i] = aligned_alloc(4096, 1 << 20);
            memset(bufs[i], 0, 1 << 20);
            qfree[i] = i;
        }
        nfree = NBUF; nfree_t = 0;
    } else if (A3) {
        bufs[0] = aligned_alloc(4096, 1 << 20);
        memset(bufs[0], 0, 1 << 20);
        for (int i = 0; i < BATCH; i++) {
            iov[i][0].iov_base = &hdr[i];
            iov[i][0].iov_len = HDR;
            iov[i][1].iov_len = FRAME;
            m[i].msg_hdr.msg_iov = iov[i];
            m[i].msg_hdr.msg_iovlen = 2;
        }
    } else {
        base = mmap(NULL, VA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
        if (base == MAP_FAILED) die("mmap file");
        for (int i = 0; i < BATCH; i++) {
            iov[i][0].iov_base = &hdr[i];
            iov[i][0].iov_len = HDR;
            iov[i][1].iov_len = FRAME;
            m[i].msg_hdr.msg_iov = iov[i];
            m[i].msg_hdr.msg_iovlen = 2;
        }
    }
    pthread_t ht, wt;
    if (C) pthread_create(&ht, NULL, helper_thread, NULL);
    if (A2) pthread_create(&wt, NULL, writer_thread, NULL);
    fprintf(stderr, "ready\n");

    uint64_t n = 0, bad = 0, seq_first = 0, seq_last = 0, seq_missing = 0, seq_back = 0, grow_fallback = 0,
             unmapped = 0, rx_unmaps = 0, calls = 0;
    int started = 0, idle = 0, nap = 0;
    uint64_t naps = 0;
    double t_first = 0, t_last = 0;
    char *buf = NULL;
    int cur = -1, fill = 0;
    if (A1) buf = bufs[0];
    if (A2) { cur = pop_free(); buf = bufs[cur]; }

    for (;;) {
        if (MM) {
            uint64_t need = (n + BATCH) * FRAME;
            if (need > atomic_load(&sh->fsize)) {
                if (C || D) grow_fallback++;
                grow_to(fd, need);
            }
            for (int i = 0; i < BATCH; i++) iov[i][1].iov_base = base + (n + i) * FRAME;
        }
        int want = BATCH;
        if (A3) {
            want = BUFCAP - fill < BATCH ? BUFCAP - fill : BATCH;
            for (int i = 0; i < want; i++) iov[i][1].iov_base = bufs[0] + (size_t)(fill + i) * FRAME;
        }
        int r = 0;
        if (nap) {
            usleep(NAP_US);
            naps++;
            r = recvmmsg(sock, m, want, MSG_DONTWAIT, NULL);
            if (r < 0 && errno == EAGAIN) r = 0;
        }
        nap = 0;
        if (r == 0) r = recvmmsg(sock, m, want, MSG_WAITFORONE, NULL);
        if (r <= 0) {
            if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) die("recvmmsg");
            idle++;
            if ((started && idle >= 10) || idle >= 600) break;
            continue;
        }
        calls++;
        idle = 0;
        nap = NAP_US > 0 && r < want / 2;
        if (!started) { started = 1; t_first = now(); }
        for (int i = 0; i < r; i++) {
            uint64_t s;
            if (m[i].msg_len != DGRAM) bad++;
            if (MM || A3) s = hdr[i];
            else memcpy(&s, rb + (size_t)i * DGRAM, 8);
            if (n + i == 0) seq_first = s;
            else if (s == seq_last + 1) {}
            else if (s > seq_last) seq_missing += s - seq_last - 1;
            else seq_back++;
            seq_last = s;
            if ((A1 || A2) && !M) {
                memcpy(buf + (size_t)fill * FRAME, rb + (size_t)i * DGRAM + HDR, FRAME);
                if (++fill == BUFCAP) {
                    if (A1) write_all(fd, buf, (size_t)fill * FRAME);
                    else { push_full(cur, (size_t)fill * FRAME); cur = pop_free(); buf = bufs[cur]; }
                    fill = 0;
                }
            }
        }
        n += r;
        if (A3) {
            fill += r;
            if (fill == BUFCAP) { write_all(fd, bufs[0], (size_t)fill * FRAME); fill = 0; }
        }
        if (MM) {
            atomic_store(&sh->pos, n * FRAME);
            if (B || D) {
                while (unmapped + WIN <= n * FRAME) {
                    if (munmap(base + unmapped, WIN) < 0) die("munmap");
                    unmapped += WIN;
                    rx_unmaps++;
                }
            }
        }
        if (countmap) *(volatile uint64_t *)countmap = n;
        t_last = now();
    }
    long drops = udp_drops(port);
    // finish
    if (A1 && !M && fill) write_all(fd, buf, (size_t)fill * FRAME);
    if (A3 && fill) write_all(fd, bufs[0], (size_t)fill * FRAME);
    if (A2) {
        if (fill) push_full(cur, (size_t)fill * FRAME);
        push_full(-1, 0);
        pthread_join(wt, NULL);
    }
    atomic_store(&sh->done, 1);
    if (C) pthread_join(ht, NULL);
    int cstatus = 0;
    struct rusage cru = {0};
    if (D) wait4(child, &cstatus, 0, &cru);
    if (MM) {
        if (ftruncate(fd, n * FRAME) < 0) die("final ftruncate");
        if (VA > unmapped) munmap(base + unmapped, VA - unmapped);
    }
    struct tstat rx;
    thread_stat(&rx);
    struct stat st;
    fstat(fd, &st);
    close(fd);
    struct rusage self;
    getrusage(RUSAGE_SELF, &self);

    double act = t_last - t_first;
    uint64_t helper_ns = (C || D) ? sh->helper.ns : A2 ? writer_stat.ns : 0;
    long helper_vcsw = (C || D) ? sh->helper.nvcsw : A2 ? writer_stat.nvcsw : 0;
    long helper_flt = (C || D) ? sh->helper.minflt : A2 ? writer_stat.minflt : 0;
    double fr = n ? (double)n : 1;
    printf("{\"mode\":\"%s\",\"received\":%llu,\"bad_len\":%llu,\"seq_first\":%llu,\"seq_last\":%llu,"
           "\"seq_missing\":%llu,\"seq_back\":%llu,\"kernel_drops\":%ld,\"file_bytes\":%lld,\"file_frames\":%.3f,"
           "\"active_s\":%.3f,\"calls\":%llu,\"frames_per_call\":%.2f,"
           "\"rx_us\":%.3f,\"helper_us\":%.3f,\"total_us\":%.3f,"
           "\"rx_vcsw_s\":%.1f,\"helper_vcsw_s\":%.1f,\"rx_nivcsw\":%ld,"
           "\"rx_minflt_per_frame\":%.3f,\"helper_minflt\":%ld,"
           "\"grow_fallback\":%llu,\"rx_unmaps\":%llu,\"helper_unmaps\":%llu,\"populate_calls\":%llu,\"touch\":%llu,"
           "\"batch\":%d,\"nap_us\":%d,\"naps\":%llu,\"rx_waits\":%lu,\"writer_waits\":%lu,\"rusage_self_us\":%.3f,\"child_rusage_us\":%.3f}\n",
           mode, (unsigned long long)n, (unsigned long long)bad, (unsigned long long)seq_first,
           (unsigned long long)seq_last, (unsigned long long)seq_missing, (unsigned long long)seq_back, drops,
           (long long)st.st_size, st.st_size / (double)FRAME, act, (unsigned long long)calls, n / (double)(calls ? calls : 1),
           rx.ns / 1e3 / fr, helper_ns / 1e3 / fr, (rx.ns + helper_ns) / 1e3 / fr,
           rx.nvcsw / (act > 0 ? act : 1), helper_vcsw / (act > 0 ? act : 1), rx.nivcsw,
           rx.minflt / fr, helper_flt,
           (unsigned long long)grow_fallback, (unsigned long long)rx_unmaps, (unsigned long long)sh->unmaps,
           (unsigned long long)sh->populate_calls, (unsigned long long)sh->touch_fallback, BATCH, NAP_US, (unsigned long long)naps, rx_waits, writer_waits,
           ((self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1e6 + self.ru_utime.tv_usec + self.ru_stime.tv_usec) / fr,
           ((cru.ru_utime.tv_sec + cru.ru_stime.tv_sec) * 1e6 + cru.ru_utime.tv_usec + cru.ru_stime.tv_usec) / fr);
    return 0;
}
