// libpq's types and constants, PostgreSQL's C client (Debian's libpq-dev), for TLSAuditPostgres
// only. Not linked: LibPQ.swift loads libpq.so.5 when the first connection is made.
#include <postgresql/libpq-fe.h>
