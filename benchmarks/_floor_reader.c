/* The floor under any paced stream reader on this machine (bench_client_cpu.py --floor).

   One thread in C: N keep-alive connections to benchmarks/_sse_server.py, each sending the next
   request when its answer's last bytes ("0\r\n\r\n") arrive; epoll over all of them, one
   clock_gettime stamp per epoll return, and per ready socket one recvmsg(2) with the kernel's
   software receive stamp (SO_TIMESTAMPING), as loadtest's reader thread does. Nothing is parsed
   beyond counting the events ("data: ") and nothing is recorded: what is left is the kernel's
   share of a chunk (the wake-up, the read, the ACK it sends) and a few loads and stores.

   Usage: _floor_reader PORT STREAMS SECONDS. Prints one line: "events reads wakes cpu_s wall_s". */
#include <arpa/inet.h>
#include <linux/net_tstamp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQUEST[] =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    "Content-Length: 2\r\n\r\n{}";

static double monotonic(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec + r.ru_stime.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT STREAMS SECONDS\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]), streams = atoi(argv[2]);
    double seconds = atof(argv[3]);
    int ep = epoll_create1(0);
    for (int i = 0; i < streams; i++) {
        int s = socket(AF_INET, SOCK_STREAM, 0), on = 1;
        int stamping = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        setsockopt(s, SOL_SOCKET, SO_TIMESTAMPING, &stamping, sizeof stamping);
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
        if (connect(s, (struct sockaddr *)&addr, sizeof addr) < 0 || write(s, REQUEST, sizeof REQUEST - 1) < 0) {
            perror("connect");
            return 1;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};
        epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev);
    }
    static char buf[65536];
    char control[256];
    long events = 0, reads = 0, wakes = 0;
    volatile double last_stamp = 0.0; /* kept, as a reader keeps its stamp */
    double cpu0 = cpu_s(), start = monotonic(), end = start + seconds;
    struct epoll_event ready[256];
    while (monotonic() < end) {
        int n = epoll_wait(ep, ready, 256, 10);
        last_stamp = monotonic();
        wakes++;
        for (int i = 0; i < n; i++) {
            int s = ready[i].data.fd;
            struct iovec iov = {buf, sizeof buf};
            struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                                 .msg_controllen = sizeof control};
            ssize_t got = recvmsg(s, &msg, 0);
            if (got <= 0)
                continue;
            reads++;
            for (ssize_t j = 0; j + 6 <= got; j++)
                if (buf[j] == 'd' && memcmp(buf + j, "data: ", 6) == 0)
                    events++;
            if (got >= 5 && memcmp(buf + got - 5, "0\r\n\r\n", 5) == 0 && write(s, REQUEST, sizeof REQUEST - 1) < 0)
                return 1;
        }
    }
    double cpu = cpu_s() - cpu0, wall = monotonic() - start;
    /* Let the answers under way end before closing (the server would log each write to a closed
       socket): read on without new requests, at most 5 s. */
    int open_streams = streams;
    double drain_end = monotonic() + 5.0;
    while (open_streams > 0 && monotonic() < drain_end) {
        int n = epoll_wait(ep, ready, 256, 10);
        for (int i = 0; i < n; i++) {
            int s = ready[i].data.fd;
            ssize_t got = recv(s, buf, sizeof buf, 0);
            if (got <= 0 || (got >= 5 && memcmp(buf + got - 5, "0\r\n\r\n", 5) == 0)) {
                epoll_ctl(ep, EPOLL_CTL_DEL, s, NULL);
                close(s);
                open_streams--;
            }
        }
    }
    printf("%ld %ld %ld %.6f %.6f\n", events, reads, wakes, cpu, wall);
    (void)last_stamp;
    return 0;
}
