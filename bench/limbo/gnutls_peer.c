/* gnutls_peer.c: x509-limbo cases through GnuTLS, set up as limbo's
 * harness/gnutls/test-gnutls drives `certtool --verify` (certtool's
 * _verify_x509_mem): trusted certs in a gnutls_x509_trust_list, the peer
 * followed by the untrusted intermediates as the chain to verify,
 * gnutls_x509_trust_list_verify_crt2 with flags DO_NOT_ALLOW_SAME | the
 * "medium" profile, typed data serverAuth purpose OID + the peer name as
 * GNUTLS_DT_DNS_HOSTNAME (GnuTLS matches a textual IP there against IP SANs
 * only, as certtool --verify-hostname does), and the validation time through
 * gnutls_global_set_time_function (what certtool --attime does; null = now).
 * Unlike limbo (which skips CRL cases) the CRLs go into the trust list.
 * Build: gcc -O2 gnutls_peer.c -lgnutls -ljansson */
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include "harness.h"

static const char *library_version(void)
{
  static char buf[64];
  snprintf(buf, sizeof buf, "GnuTLS %s", gnutls_check_version(NULL));
  return buf;
}

static time_t fixed_time;
static time_t clock_at_validation_time(time_t *t)
{
  if (t) *t = fixed_time;
  return fixed_time;
}

/* Concatenate a JSON array of PEM strings (after `first`, if given). */
static char *join_pems(const char *first, json_t *arr)
{
  size_t i, len = first ? strlen(first) + 1 : 0;
  json_t *v;
  char *buf, *p;
  json_array_foreach(arr, i, v) len += strlen(json_string_value(v)) + 1;
  p = buf = malloc(len + 1);
  if (first) p += sprintf(p, "%s\n", first);
  json_array_foreach(arr, i, v) p += sprintf(p, "%s\n", json_string_value(v));
  *p = '\0';
  return buf;
}

static int evaluate(json_t *tc)
{
  gnutls_x509_trust_list_t list = NULL;
  gnutls_x509_crt_t *chain = NULL;
  unsigned n = 0, i, status = 0, ndata = 0;
  char *cas = join_pems(NULL, json_object_get(tc, "trusted_certs"));
  char *crls = join_pems(NULL, json_object_get(tc, "crls"));
  char *certs = join_pems(str(tc, "peer_certificate"), json_object_get(tc, "untrusted_intermediates"));
  gnutls_datum_t ca_d = {(unsigned char *)cas, strlen(cas)};
  gnutls_datum_t crl_d = {(unsigned char *)crls, strlen(crls)};
  gnutls_datum_t cert_d = {(unsigned char *)certs, strlen(certs)};
  gnutls_typed_vdata_st vdata[2] = {
      {GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_SERVER, 0}};
  json_t *name = json_object_get(tc, "expected_peer_name");
  int r = HARNESS_ERROR;

  ndata = 1;
  if (json_is_object(name)) {
    const char *kind = str(name, "kind");
    vdata[ndata].type = strcmp(kind, "RFC822") == 0 ? GNUTLS_DT_RFC822NAME : GNUTLS_DT_DNS_HOSTNAME;
    vdata[ndata++].data = (unsigned char *)str(name, "value");
  }
  switch (validation_time(tc, &fixed_time)) {
  case 1: gnutls_global_set_time_function(clock_at_validation_time); break;
  case 0: gnutls_global_set_time_function(time); break;
  default: goto done;
  }
  if (gnutls_x509_trust_list_init(&list, 0) < 0) goto done;
  r = UNPARSABLE; /* certtool --verify exits 1 when these fail */
  if (gnutls_x509_trust_list_add_trust_mem(list, &ca_d, crl_d.size ? &crl_d : NULL,
                                           GNUTLS_X509_FMT_PEM, 0, 0) < 0) goto done;
  if (gnutls_x509_crt_list_import2(&chain, &n, &cert_d, GNUTLS_X509_FMT_PEM, 0) < 0 || n < 1)
    goto done;
  r = HARNESS_ERROR;
  if (gnutls_x509_trust_list_verify_crt2(
          list, chain, n, vdata, ndata,
          GNUTLS_VERIFY_DO_NOT_ALLOW_SAME | GNUTLS_PROFILE_TO_VFLAGS(GNUTLS_PROFILE_MEDIUM),
          &status, NULL) < 0)
    goto done;
  r = status == 0;

done:
  for (i = 0; i < n; i++) gnutls_x509_crt_deinit(chain[i]);
  gnutls_free(chain);
  if (list) gnutls_x509_trust_list_deinit(list, 1);
  free(cas);
  free(crls);
  free(certs);
  return r;
}
