#include "probe_library.h"

#include <openssl/core_dispatch.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A provider that is OpenSSL's default provider with fewer decoders: its query answers with the
 * default provider's own algorithm tables, except for OSSL_OP_DECODER, and its provider context is
 * the default provider's, so every algorithm runs as it does in the default library context (keys
 * are the default provider's structures, nested fetches go to the default library context). */

static OSSL_PROVIDER *default_provider;
static OSSL_ALGORITHM *key_decoders;
static int key_decoder_count;
static OSSL_LIB_CTX *probe_context;
static pthread_once_t probe_context_once = PTHREAD_ONCE_INIT;

static const OSSL_ALGORITHM *probe_query_operation(void *provider_context, int operation, int *no_cache) {
    (void)provider_context;
    if (operation == OSSL_OP_DECODER) {
        *no_cache = 0;
        return key_decoders;
    }
    return OSSL_PROVIDER_query_operation(default_provider, operation, no_cache);
}

static void probe_unquery_operation(void *provider_context, int operation, const OSSL_ALGORITHM *algorithms) {
    (void)provider_context;
    if (operation != OSSL_OP_DECODER)
        OSSL_PROVIDER_unquery_operation(default_provider, operation, algorithms);
}

/* libssl learns the TLS groups from here. */
static int probe_get_capabilities(void *provider_context, const char *capability, OSSL_CALLBACK *callback, void *argument) {
    (void)provider_context;
    return OSSL_PROVIDER_get_capabilities(default_provider, capability, callback, argument);
}

static const OSSL_PARAM *probe_gettable_params(void *provider_context) {
    (void)provider_context;
    return OSSL_PROVIDER_gettable_params(default_provider);
}

static int probe_get_params(void *provider_context, OSSL_PARAM parameters[]) {
    (void)provider_context;
    return OSSL_PROVIDER_get_params(default_provider, parameters);
}

/* The default provider's context is the default provider's to free. */
static void probe_teardown(void *provider_context) { (void)provider_context; }

static const OSSL_DISPATCH probe_dispatch[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))probe_teardown },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))probe_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))probe_get_params },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))probe_query_operation },
    { OSSL_FUNC_PROVIDER_UNQUERY_OPERATION, (void (*)(void))probe_unquery_operation },
    { OSSL_FUNC_PROVIDER_GET_CAPABILITIES, (void (*)(void))probe_get_capabilities },
    { 0, NULL }
};

static int probe_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                               const OSSL_DISPATCH **out, void **provider_context) {
    (void)handle;
    (void)in;
    *provider_context = OSSL_PROVIDER_get0_provider_ctx(default_provider);
    *out = probe_dispatch;
    return *provider_context != NULL;
}

/* A DER SubjectPublicKeyInfo decoder for one key type: "input=der" and
 * "structure=SubjectPublicKeyInfo" in its properties, and not the generic "DER" to "DER" one (which
 * only renames the structure for the next decoder). */
static int is_key_decoder(const OSSL_ALGORITHM *algorithm) {
    const char *properties = algorithm->property_definition;
    return properties != NULL && strstr(properties, "input=der") != NULL
        && strstr(properties, "structure=SubjectPublicKeyInfo") != NULL
        && strncmp(algorithm->algorithm_names, "DER", 3) != 0;
}

/* Counts the providers of the default context other than "default" (OSSL_PROVIDER_do_all). */
static int count_other_provider(OSSL_PROVIDER *provider, void *others) {
    if (strcmp(OSSL_PROVIDER_get0_name(provider), "default") != 0)
        ++*(int *)others;
    return 1;
}

static void make_probe_context(void) {
    /* Loading "default" explicitly keeps it the default context's provider (as it would be
     * implicitly) and gives the handle whose tables and context this provider lends. */
    default_provider = OSSL_PROVIDER_load(NULL, "default");
    if (default_provider == NULL)
        return;
    int others = 0;
    OSSL_PROVIDER_do_all(NULL, count_other_provider, &others);
    if (others > 0 || EVP_default_properties_is_fips_enabled(NULL))
        return;
    int no_cache = 0;
    const OSSL_ALGORITHM *decoders = OSSL_PROVIDER_query_operation(default_provider, OSSL_OP_DECODER, &no_cache);
    if (decoders == NULL)
        return;
    size_t total = 0;
    while (decoders[total].algorithm_names != NULL)
        total++;
    OSSL_ALGORITHM *kept = calloc(total + 1, sizeof *kept);
    if (kept == NULL)
        return;
    int count = 0;
    for (size_t index = 0; index < total; index++)
        if (is_key_decoder(&decoders[index]))
            kept[count++] = decoders[index];
    if (count == 0) {
        free(kept);
        return;
    }
    key_decoders = kept;
    OSSL_LIB_CTX *context = OSSL_LIB_CTX_new();
    if (context == NULL)
        return;
    if (OSSL_PROVIDER_add_builtin(context, "tlsaudit-probe", probe_provider_init) != 1
        || OSSL_PROVIDER_load(context, "tlsaudit-probe") == NULL) {
        OSSL_LIB_CTX_free(context);
        return;
    }
    key_decoder_count = count;
    probe_context = context;
}

OSSL_LIB_CTX *tlsaudit_probe_library_context(void) {
    pthread_once(&probe_context_once, make_probe_context);
    return probe_context;
}

int tlsaudit_probe_library_decoder_count(void) {
    pthread_once(&probe_context_once, make_probe_context);
    return key_decoder_count;
}
