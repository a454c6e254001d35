#ifndef TLSAUDIT_PROBE_LIBRARY_H
#define TLSAUDIT_PROBE_LIBRARY_H

#include <openssl/types.h>

/// The OpenSSL library context the probe's TLS client contexts are made in, created once: every
/// algorithm of OpenSSL's default provider, but only the key decoders a handshake uses (DER
/// SubjectPublicKeyInfo, one per key type). NULL when it cannot be made; callers then use the
/// default context.
///
/// Why: OpenSSL 3.0's `d2i_X509` decodes each certificate's key through a decoder chain built
/// for it, and building one asks every decoder of the context about every name of the key's type,
/// then again about each decoder it found (`OSSL_DECODER_CTX_new_for_pkey`,
/// `OSSL_DECODER_CTX_add_extra`): about 0.68M instructions a certificate with the default
/// provider's 46 decoders, 28% of a verified handshake. OpenSSL 3.1 caches these chains; 3.0 does
/// not. Certificates (DER, and PEM through PEM_read_bio_X509) are read in it; private keys, PEM
/// keys and PKCS#12 files never are (they need the decoders left out).
///
/// Not made (NULL) when the default context has a provider other than "default" active (the
/// legacy provider, one a configuration file loads) or FIPS default properties: this context
/// offers the default provider's algorithms alone, and would answer differently.
OSSL_LIB_CTX *tlsaudit_probe_library_context(void);

/// How many of the default provider's decoders the probe's context offers (0 before it is made
/// or when it could not be).
int tlsaudit_probe_library_decoder_count(void);

#endif
