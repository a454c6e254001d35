#ifndef TLSAUDIT_CZLIB_SHIM_H
#define TLSAUDIT_CZLIB_SHIM_H

#include <zlib.h>

/// inflateInit2 is a macro (it passes the header's version and the stream's size): Swift cannot call it.
/// windowBits -15 reads raw deflate data, as a zip entry holds it (no zlib header, no trailer).
static inline int CZlib_inflateInitRaw(z_stream *stream) {
    return inflateInit2(stream, -15);
}

/// windowBits 16 + 15 reads a gzip member (RFC 1952: header, deflate data, CRC-32 and size), as an
/// HTTP answer with `Content-Encoding: gzip` holds it.
static inline int CZlib_inflateInitGzip(z_stream *stream) {
    return inflateInit2(stream, 16 + 15);
}

#endif
