/* A reference for bench/run: the fastest plain OpenSSL client this machine runs. N threads, each
 * doing full handshakes one after the other against 127.0.0.1:PORT (no session reuse, no
 * verification, nothing read or kept), for SECONDS. Prints "handshakes_per_s client_cpu_ms".
 *
 *   cc -O2 bench/bare_client.c -o bare_client -lssl -lcrypto -lpthread
 *   ./bare_client PORT THREADS SECONDS
 */
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static SSL_CTX *context;
static int port;
static double deadline;
static atomic_long handshakes;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void *work(void *unused) {
    (void)unused;
    while (now() < deadline) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
        if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); exit(1); }
        SSL *ssl = SSL_new(context);
        SSL_set_fd(ssl, fd);
        SSL_set_tlsext_host_name(ssl, "bench.test");
        if (SSL_connect(ssl) != 1) { fprintf(stderr, "handshake failed\n"); exit(1); }
        atomic_fetch_add(&handshakes, 1);
        SSL_shutdown(ssl);
        SSL_free(ssl);
        close(fd);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: bare_client PORT THREADS SECONDS\n"); return 64; }
    port = atoi(argv[1]);
    int threads = atoi(argv[2]);
    context = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(context, SSL_VERIFY_NONE, NULL);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    double start = now();
    deadline = start + atof(argv[3]);
    pthread_t pool[threads];
    for (int i = 0; i < threads; i++) pthread_create(&pool[i], NULL, work, NULL);
    for (int i = 0; i < threads; i++) pthread_join(pool[i], NULL);
    double wall = now() - start;
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    long count = atomic_load(&handshakes);
    printf("%.1f %.3f\n", count / wall, count ? cpu / count * 1000 : 0.0);
    return 0;
}
