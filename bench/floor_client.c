/* The memory floor of case (a) in C, for bench/run: for each "host:port" line of TARGETS, one full
 * handshake to 127.0.0.1:port, one after the other, with SNI and verification against CA (chain
 * and host name), the verdict and cipher of each kept in memory; prints "verified N of M".
 * bench/floor_client.swift does the same in Swift: the two show what the job costs in peak RSS
 * before anything tlsaudit adds, in each language.
 *
 *   cc -O2 bench/floor_client.c -o floor_client -lssl -lcrypto
 *   ./floor_client TARGETS CA
 */
#define _GNU_SOURCE /* asprintf */
#include <arpa/inet.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: floor_client TARGETS CA\n"); return 2; }
    FILE *targets = fopen(argv[1], "r");
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (!targets || !context || SSL_CTX_load_verify_locations(context, argv[2], NULL) != 1) {
        fprintf(stderr, "floor_client: cannot read %s or %s\n", argv[1], argv[2]);
        return 2;
    }
    char line[512], **verdicts = NULL;
    int count = 0, verified = 0;
    while (fgets(line, sizeof line, targets)) {
        char *colon = strrchr(line, ':');
        if (!colon) continue;
        *colon = 0;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(atoi(colon + 1))};
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
        if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
        SSL *ssl = SSL_new(context);
        SSL_set_fd(ssl, fd);
        SSL_set_tlsext_host_name(ssl, line);
        SSL_set1_host(ssl, line);
        int ok = SSL_connect(ssl) == 1 && SSL_get_verify_result(ssl) == X509_V_OK;
        verified += ok;
        verdicts = realloc(verdicts, (count + 1) * sizeof *verdicts);
        if (asprintf(&verdicts[count++], "%s:%s %s %s", line, colon + 1, ok ? "verified" : "failed", SSL_get_cipher(ssl)) < 0) return 1;
        SSL_free(ssl);
        close(fd);
    }
    printf("verified %d of %d\n", verified, count);
    return 0;
}
