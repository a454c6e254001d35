/*
 * The whole C surface of tlsaudit: OpenSSL 3 headers plus one-line wrappers for
 * what Swift cannot import (function-like macros, variadic functions, unions).
 * Every wrapper is prefixed `tlsaudit_` and does nothing but forward.
 */
#ifndef TLSAUDIT_COPENSSL_SHIM_H
#define TLSAUDIT_COPENSSL_SHIM_H

#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ocsp.h>
#include <openssl/ct.h>
#include <openssl/pkcs12.h>
#include <openssl/provider.h>
#include <openssl/pkcs7.h>

static const uint64_t tlsaudit_SSL_OP_LEGACY_SERVER_CONNECT = SSL_OP_LEGACY_SERVER_CONNECT;
static const uint64_t tlsaudit_SSL_OP_CIPHER_SERVER_PREFERENCE = SSL_OP_CIPHER_SERVER_PREFERENCE;
static const uint64_t tlsaudit_SSL_OP_NO_TICKET = SSL_OP_NO_TICKET;

/* Name printing flags: XN_FLAG_RFC2253 is dropped by the importer. */
static const unsigned long tlsaudit_XN_FLAG_RFC2253 = XN_FLAG_RFC2253;

/* --- SSL_CTX / SSL macros --- */
static inline long tlsaudit_SSL_get_secure_renegotiation_support(SSL *ssl) { return SSL_get_secure_renegotiation_support(ssl); }
static inline long tlsaudit_SSL_get_extms_support(SSL *ssl) { return SSL_get_extms_support(ssl); }
static inline long tlsaudit_SSL_set_mode(SSL *ssl, long mode) { return SSL_set_mode(ssl, mode); }
static inline int tlsaudit_SSL_set1_groups_list(SSL *ssl, const char *list) { return (int)SSL_set1_groups_list(ssl, list); }
static inline int tlsaudit_SSL_set1_sigalgs_list(SSL *ssl, const char *list) { return (int)SSL_set1_sigalgs_list(ssl, list); }
static inline int tlsaudit_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int v) { return (int)SSL_CTX_set_min_proto_version(ctx, v); }
static inline int tlsaudit_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int v) { return (int)SSL_CTX_set_max_proto_version(ctx, v); }
static inline int tlsaudit_SSL_CTX_set1_groups_list(SSL_CTX *ctx, const char *list) { return (int)SSL_CTX_set1_groups_list(ctx, list); }
static inline int tlsaudit_SSL_CTX_set1_sigalgs_list(SSL_CTX *ctx, const char *list) { return (int)SSL_CTX_set1_sigalgs_list(ctx, list); }
static inline int tlsaudit_SSL_CTX_set1_client_sigalgs_list(SSL_CTX *ctx, const char *list) { return (int)SSL_CTX_set1_client_sigalgs_list(ctx, list); }
static inline long tlsaudit_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long tlsaudit_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_session_cache_mode(ctx, mode); }
static inline void tlsaudit_SSL_CTX_set_read_ahead(SSL_CTX *ctx, int yes) { SSL_CTX_set_read_ahead(ctx, yes); }
static inline int tlsaudit_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return (int)SSL_set_tlsext_host_name(ssl, name); }
static inline int tlsaudit_SSL_get_peer_tmp_key(SSL *ssl, EVP_PKEY **key) { return (int)SSL_get_peer_tmp_key(ssl, key); }
static inline int tlsaudit_SSL_get_negotiated_group(SSL *ssl) { return (int)SSL_get_negotiated_group(ssl); }
static inline int tlsaudit_SSL_get_peer_signature_nid(SSL *ssl, int *nid) { return (int)SSL_get_peer_signature_nid(ssl, nid); }
static inline int tlsaudit_SSL_set_min_proto_version(SSL *ssl, int v) { return (int)SSL_set_min_proto_version(ssl, v); }
static inline int tlsaudit_SSL_set_max_proto_version(SSL *ssl, int v) { return (int)SSL_set_max_proto_version(ssl, v); }
static inline int tlsaudit_sk_SSL_CIPHER_num(const STACK_OF(SSL_CIPHER) *sk) { return sk_SSL_CIPHER_num(sk); }
static inline const SSL_CIPHER *tlsaudit_sk_SSL_CIPHER_value(const STACK_OF(SSL_CIPHER) *sk, int i) { return sk_SSL_CIPHER_value(sk, i); }
static inline void tlsaudit_sk_SSL_CIPHER_free(STACK_OF(SSL_CIPHER) *sk) { sk_SSL_CIPHER_free(sk); }
static inline void tlsaudit_SSL_set_msg_callback_arg(SSL *ssl, void *arg) { SSL_set_msg_callback_arg(ssl, arg); }
static inline int tlsaudit_SSL_set_app_data(SSL *ssl, void *arg) { return SSL_set_app_data(ssl, arg); }
static inline void *tlsaudit_SSL_get_app_data(const SSL *ssl) { return SSL_get_app_data(ssl); }
static inline long tlsaudit_SSL_CTX_set0_tmp_dh_pkey(SSL_CTX *ctx, EVP_PKEY *dh) { return SSL_CTX_set0_tmp_dh_pkey(ctx, dh); }
static inline long tlsaudit_SSL_get_tlsext_status_ocsp_resp(SSL *ssl, const unsigned char **resp) { return SSL_get_tlsext_status_ocsp_resp(ssl, resp); }
static inline long tlsaudit_SSL_set_tlsext_status_type(SSL *ssl, int type) { return SSL_set_tlsext_status_type(ssl, type); }

/* --- X509_STORE_CTX app data (ex_data index 0) --- */
static inline int tlsaudit_X509_STORE_CTX_set_app_data(X509_STORE_CTX *ctx, void *arg) { return X509_STORE_CTX_set_app_data(ctx, arg); }
static inline void *tlsaudit_X509_STORE_CTX_get_app_data(X509_STORE_CTX *ctx) { return X509_STORE_CTX_get_app_data(ctx); }

/* --- BIO and memory --- */
static inline long tlsaudit_BIO_get_mem_data(BIO *bio, char **data) { return BIO_get_mem_data(bio, data); }
static inline void tlsaudit_OPENSSL_free(void *p) { OPENSSL_free(p); }

/* --- Key generation (variadic EVP_PKEY_Q_keygen behind macros) --- */
static inline EVP_PKEY *tlsaudit_generate_rsa(unsigned int bits) { return EVP_RSA_gen(bits); }
static inline EVP_PKEY *tlsaudit_generate_ec(const char *curve) { return EVP_EC_gen(curve); }
static inline EVP_PKEY *tlsaudit_generate_ed25519(void) { return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519"); }
/* An RSASSA-PSS key (SPKI algorithm id-RSASSA-PSS): usable only with the rsa_pss_pss_* TLS signature schemes. */
static inline EVP_PKEY *tlsaudit_generate_rsa_pss(int bits) {
    EVP_PKEY *key = NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA-PSS", NULL);
    if (ctx == NULL || EVP_PKEY_keygen_init(ctx) <= 0 || EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) <= 0
        || EVP_PKEY_keygen(ctx, &key) <= 0) key = NULL;
    EVP_PKEY_CTX_free(ctx);
    return key;
}
/* DSA needs domain parameters first: generate them, then a key (lab use only). */
static inline EVP_PKEY *tlsaudit_generate_dsa(int bits) {
    EVP_PKEY *params = NULL, *key = NULL;
    EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(NULL, "DSA", NULL);
    if (pctx == NULL || EVP_PKEY_paramgen_init(pctx) <= 0 || EVP_PKEY_CTX_set_dsa_paramgen_bits(pctx, bits) <= 0
        || EVP_PKEY_paramgen(pctx, &params) <= 0) { EVP_PKEY_CTX_free(pctx); return NULL; }
    EVP_PKEY_CTX_free(pctx);
    EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_from_pkey(NULL, params, NULL);
    if (kctx == NULL || EVP_PKEY_keygen_init(kctx) <= 0 || EVP_PKEY_keygen(kctx, &key) <= 0) key = NULL;
    EVP_PKEY_CTX_free(kctx);
    EVP_PKEY_free(params);
    return key;
}

/* --- Stacks (sk_* are macros over OPENSSL_sk_*) --- */
static inline int tlsaudit_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *tlsaudit_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline STACK_OF(X509) *tlsaudit_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int tlsaudit_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline void tlsaudit_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void tlsaudit_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }
static inline long tlsaudit_SSL_CTX_add1_chain_cert(SSL_CTX *ctx, X509 *x) { return SSL_CTX_add1_chain_cert(ctx, x); }

static inline int tlsaudit_sk_GENERAL_NAME_num(const GENERAL_NAMES *sk) { return sk_GENERAL_NAME_num(sk); }
static inline GENERAL_NAME *tlsaudit_sk_GENERAL_NAME_value(const GENERAL_NAMES *sk, int i) { return sk_GENERAL_NAME_value(sk, i); }
static inline void tlsaudit_GENERAL_NAMES_free(GENERAL_NAMES *names) { GENERAL_NAMES_free(names); }
static inline int tlsaudit_GENERAL_NAME_type(const GENERAL_NAME *name) { return name->type; }
/* The string behind a dNSName, rfc822Name, URI or iPAddress entry (all ASN1_STRING). */
static inline const ASN1_STRING *tlsaudit_GENERAL_NAME_string(const GENERAL_NAME *name) {
    switch (name->type) {
    case GEN_DNS: return name->d.dNSName;
    case GEN_EMAIL: return name->d.rfc822Name;
    case GEN_URI: return name->d.uniformResourceIdentifier;
    case GEN_IPADD: return name->d.iPAddress;
    default: return NULL;
    }
}

static inline STACK_OF(GENERAL_SUBTREE) *tlsaudit_NAME_CONSTRAINTS_permitted(const NAME_CONSTRAINTS *nc) { return nc->permittedSubtrees; }
static inline STACK_OF(GENERAL_SUBTREE) *tlsaudit_NAME_CONSTRAINTS_excluded(const NAME_CONSTRAINTS *nc) { return nc->excludedSubtrees; }
static inline int tlsaudit_sk_GENERAL_SUBTREE_num(const STACK_OF(GENERAL_SUBTREE) *sk) { return sk_GENERAL_SUBTREE_num(sk); }
static inline const GENERAL_NAME *tlsaudit_GENERAL_SUBTREE_base(const STACK_OF(GENERAL_SUBTREE) *sk, int i) { return sk_GENERAL_SUBTREE_value(sk, i)->base; }
static inline void tlsaudit_NAME_CONSTRAINTS_free(NAME_CONSTRAINTS *nc) { NAME_CONSTRAINTS_free(nc); }
/* authorityInfoAccess, for the conformance lints: the entries and their location types. */
static inline void tlsaudit_AUTHORITY_INFO_ACCESS_free(AUTHORITY_INFO_ACCESS *aia) { AUTHORITY_INFO_ACCESS_free(aia); }
static inline int tlsaudit_sk_ACCESS_DESCRIPTION_num(const AUTHORITY_INFO_ACCESS *aia) { return sk_ACCESS_DESCRIPTION_num(aia); }
static inline ACCESS_DESCRIPTION *tlsaudit_sk_ACCESS_DESCRIPTION_value(const AUTHORITY_INFO_ACCESS *aia, int i) { return sk_ACCESS_DESCRIPTION_value(aia, i); }
static inline int tlsaudit_ACCESS_DESCRIPTION_location_type(const ACCESS_DESCRIPTION *description) { return description->location ? description->location->type : -1; }
static inline ASN1_OBJECT *tlsaudit_ACCESS_DESCRIPTION_method(const ACCESS_DESCRIPTION *description) { return description->method; }
static inline const GENERAL_NAME *tlsaudit_ACCESS_DESCRIPTION_location(const ACCESS_DESCRIPTION *description) { return description->location; }

static inline int tlsaudit_sk_SCT_num(const STACK_OF(SCT) *sk) { return sk_SCT_num(sk); }
static inline SCT *tlsaudit_sk_SCT_value(const STACK_OF(SCT) *sk, int i) { return sk_SCT_value(sk, i); }
static inline void tlsaudit_SCT_LIST_free(STACK_OF(SCT) *sk) { SCT_LIST_free(sk); }
static inline long tlsaudit_SSL_CTX_set_tlsext_status_type(SSL_CTX *ctx, int type) { return SSL_CTX_set_tlsext_status_type(ctx, type); }

static inline int tlsaudit_sk_ASN1_OBJECT_num(const STACK_OF(ASN1_OBJECT) *sk) { return sk_ASN1_OBJECT_num(sk); }
static inline ASN1_OBJECT *tlsaudit_sk_ASN1_OBJECT_value(const STACK_OF(ASN1_OBJECT) *sk, int i) { return sk_ASN1_OBJECT_value(sk, i); }
static inline void tlsaudit_EXTENDED_KEY_USAGE_free(EXTENDED_KEY_USAGE *eku) { EXTENDED_KEY_USAGE_free(eku); }

/* The certificates of a signed PKCS#7 (a certs-only `.p7c` from a caIssuers URL), or NULL. */
static inline STACK_OF(X509) *tlsaudit_PKCS7_certificates(PKCS7 *pkcs7) {
    return PKCS7_type_is_signed(pkcs7) && pkcs7->d.sign ? pkcs7->d.sign->cert : NULL;
}

/* --- Revocation: OCSP URLs, CRL distribution points, must-staple, CRL stacks --- */
static inline int tlsaudit_sk_OPENSSL_STRING_num(const STACK_OF(OPENSSL_STRING) *sk) { return sk_OPENSSL_STRING_num(sk); }
static inline const char *tlsaudit_sk_OPENSSL_STRING_value(const STACK_OF(OPENSSL_STRING) *sk, int i) { return sk_OPENSSL_STRING_value(sk, i); }
static inline int tlsaudit_sk_DIST_POINT_num(const STACK_OF(DIST_POINT) *sk) { return sk_DIST_POINT_num(sk); }
/* The full name of a distribution point (a GENERAL_NAMES), or NULL when it has none (a relative name). */
static inline const GENERAL_NAMES *tlsaudit_DIST_POINT_fullname(const STACK_OF(DIST_POINT) *sk, int i) {
    DIST_POINT *point = sk_DIST_POINT_value(sk, i);
    return (point && point->distpoint && point->distpoint->type == 0) ? point->distpoint->name.fullname : NULL;
}
static inline void tlsaudit_CRL_DIST_POINTS_free(STACK_OF(DIST_POINT) *sk) { CRL_DIST_POINTS_free(sk); }
static inline int tlsaudit_sk_ASN1_INTEGER_num(const STACK_OF(ASN1_INTEGER) *sk) { return sk_ASN1_INTEGER_num(sk); }
static inline const ASN1_INTEGER *tlsaudit_sk_ASN1_INTEGER_value(const STACK_OF(ASN1_INTEGER) *sk, int i) { return sk_ASN1_INTEGER_value(sk, i); }
static inline void tlsaudit_TLS_FEATURE_free(TLS_FEATURE *features) { TLS_FEATURE_free(features); }
static inline STACK_OF(X509_CRL) *tlsaudit_sk_X509_CRL_new_null(void) { return sk_X509_CRL_new_null(); }
static inline int tlsaudit_sk_X509_CRL_push(STACK_OF(X509_CRL) *sk, X509_CRL *crl) { return sk_X509_CRL_push(sk, crl); }
static inline void tlsaudit_sk_X509_CRL_free(STACK_OF(X509_CRL) *sk) { sk_X509_CRL_free(sk); }

#endif
