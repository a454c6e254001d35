/* openssl_peer.c: x509-limbo cases through OpenSSL's X509_verify_cert, set up
 * as limbo's harness/openssl/main.cpp does: X509_STRICT + PARTIAL_CHAIN (any
 * trusted cert is an anchor), CRLs added with CRL_CHECK|CRL_CHECK_ALL, auth
 * level 2, the peer name via set1_host (no partial wildcards) or set1_ip_asc,
 * the validation time via X509_STORE_CTX_set_time (null = now: limbo sets
 * NO_CHECK_TIME on the store then, but after X509_STORE_CTX_init has copied
 * the store's flags, so it has no effect there either), and purpose sslserver
 * (limbo sets it only when the case lists EKUs: 9 verdicts differ, net +1 agreement).
 * A name set1_host/set1_ip_asc refuses is a harness error (limbo ignores it).
 * Build: gcc -O2 openssl_peer.c -lssl -lcrypto -ljansson */
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>
#include "harness.h"

static const char *library_version(void) { return OpenSSL_version(OPENSSL_VERSION); }

static X509 *pem_cert(const char *pem)
{
  BIO *bio = BIO_new_mem_buf(pem, -1);
  X509 *x = PEM_read_bio_X509(bio, NULL, NULL, NULL);
  BIO_free(bio);
  return x;
}

static X509_CRL *pem_crl(const char *pem)
{
  BIO *bio = BIO_new_mem_buf(pem, -1);
  X509_CRL *c = PEM_read_bio_X509_CRL(bio, NULL, NULL, NULL);
  BIO_free(bio);
  return c;
}

static int evaluate(json_t *tc)
{
  X509_STORE *store = X509_STORE_new();
  STACK_OF(X509) *untrusted = sk_X509_new_null();
  X509_STORE_CTX *ctx = X509_STORE_CTX_new();
  X509 *peer = pem_cert(str(tc, "peer_certificate")), *x;
  X509_CRL *crl;
  X509_VERIFY_PARAM *param;
  json_t *v, *name = json_object_get(tc, "expected_peer_name");
  size_t i;
  time_t t;
  int r = UNPARSABLE;

  X509_STORE_set_flags(store, X509_V_FLAG_X509_STRICT | X509_V_FLAG_PARTIAL_CHAIN);
  if (!peer) goto done;
  json_array_foreach(json_object_get(tc, "trusted_certs"), i, v) {
    if (!(x = pem_cert(json_string_value(v)))) goto done;
    X509_STORE_add_cert(store, x); /* takes its own reference */
    X509_free(x);
  }
  json_array_foreach(json_object_get(tc, "crls"), i, v) {
    if (!(crl = pem_crl(json_string_value(v)))) goto done;
    X509_STORE_add_crl(store, crl);
    X509_CRL_free(crl);
    X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
  }
  json_array_foreach(json_object_get(tc, "untrusted_intermediates"), i, v) {
    if (!(x = pem_cert(json_string_value(v)))) goto done;
    sk_X509_push(untrusted, x);
  }
  r = HARNESS_ERROR;
  /* The store's flags are copied into the context here. */
  if (!X509_STORE_CTX_init(ctx, store, peer, untrusted)) goto done;
  switch (validation_time(tc, &t)) {
  case 1: X509_STORE_CTX_set_time(ctx, 0, t); break;
  case -1: goto done;
  }
  param = X509_STORE_CTX_get0_param(ctx);
  X509_VERIFY_PARAM_set_auth_level(param, 2);
  if (json_is_object(name)) {
    const char *kind = str(name, "kind"), *value = str(name, "value");
    if (strcmp(kind, "DNS") == 0) {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      if (!X509_VERIFY_PARAM_set1_host(param, value, 0)) goto done;
    } else if (strcmp(kind, "IP") == 0) {
      if (!X509_VERIFY_PARAM_set1_ip_asc(param, value)) goto done;
    } else {
      goto done;
    }
  }
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  r = X509_verify_cert(ctx) == 1;

done:
  ERR_clear_error();
  X509_STORE_CTX_free(ctx);
  sk_X509_pop_free(untrusted, X509_free);
  X509_free(peer);
  X509_STORE_free(store);
  return r;
}
