// Minimal UDT4 file sender/receiver, the peer for bench/transfer.sh (Debian's libudt-dev).
// Not part of evlbi: a benchmark harness so UDT moves the same file in the same run.
//
//   udt_file recv PORT OUTFILE           receive one file, print JSON, exit
//   udt_file send HOST PORT FILE [MSS]   send FILE (8-byte size first), print JSON
#include <udt/udt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

static double now_s() {
    using namespace std::chrono;
    return duration<double>(steady_clock::now().time_since_epoch()).count();
}

static void tune(UDTSOCKET s, int mss) {
    int buf = 64 << 20;
    UDT::setsockopt(s, 0, UDT_MSS, &mss, sizeof mss);
    UDT::setsockopt(s, 0, UDT_SNDBUF, &buf, sizeof buf);
    UDT::setsockopt(s, 0, UDT_RCVBUF, &buf, sizeof buf);
    int ubuf = 32 << 20;
    UDT::setsockopt(s, 0, UDP_SNDBUF, &ubuf, sizeof ubuf);
    UDT::setsockopt(s, 0, UDP_RCVBUF, &ubuf, sizeof ubuf);
}

static int fail(const char* what) {
    fprintf(stderr, "udt_file: %s: %s\n", what, UDT::getlasterror().getErrorMessage());
    return 1;
}

int main(int argc, char** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: udt_file recv PORT OUT | udt_file send HOST PORT FILE [MSS]\n");
        return 2;
    }
    UDT::startup();
    int mss = argc > 5 ? atoi(argv[5]) : 1500;
    if (strcmp(argv[1], "recv") == 0) {
        UDTSOCKET l = UDT::socket(AF_INET, SOCK_STREAM, 0);
        tune(l, 9000);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(atoi(argv[2]));
        a.sin_addr.s_addr = INADDR_ANY;
        if (UDT::bind(l, (sockaddr*)&a, sizeof a) == UDT::ERROR) return fail("bind");
        if (UDT::listen(l, 1) == UDT::ERROR) return fail("listen");
        sockaddr_in peer{};
        int plen = sizeof peer;
        UDTSOCKET s = UDT::accept(l, (sockaddr*)&peer, &plen);
        if (s == UDT::INVALID_SOCK) return fail("accept");
        int64_t size = 0;
        int got = 0;
        while (got < 8) {
            int n = UDT::recv(s, (char*)&size + got, 8 - got, 0);
            if (n == UDT::ERROR) return fail("recv size");
            got += n;
        }
        std::fstream out(argv[3], std::ios::out | std::ios::binary | std::ios::trunc);
        double t0 = now_s();
        int64_t off = 0;
        int64_t r = UDT::recvfile(s, out, off, size);
        double t1 = now_s();
        if (r == UDT::ERROR) return fail("recvfile");
        printf("{\"bytes\":%lld,\"seconds\":%.6f}\n", (long long)r, t1 - t0);
        UDT::close(s);
        UDT::close(l);
    } else {
        if (argc < 5) return 2;
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        if (getaddrinfo(argv[2], argv[3], &hints, &res) != 0) return 2;
        UDTSOCKET s = UDT::socket(AF_INET, SOCK_STREAM, 0);
        tune(s, mss);
        if (UDT::connect(s, res->ai_addr, res->ai_addrlen) == UDT::ERROR) return fail("connect");
        std::fstream in(argv[4], std::ios::in | std::ios::binary);
        in.seekg(0, std::ios::end);
        int64_t size = in.tellg();
        in.seekg(0, std::ios::beg);
        if (UDT::send(s, (char*)&size, 8, 0) == UDT::ERROR) return fail("send size");
        double t0 = now_s();
        int64_t off = 0;
        int64_t r = UDT::sendfile(s, in, off, size);
        double t1 = now_s();
        if (r == UDT::ERROR) return fail("sendfile");
        printf("{\"bytes\":%lld,\"seconds\":%.6f}\n", (long long)r, t1 - t0);
        UDT::close(s);
    }
    UDT::cleanup();
    return 0;
}
