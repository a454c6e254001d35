// libpq, PostgreSQL's C client (Debian's libpq-dev), for TLSAuditPostgres only.
#include <libpq-fe.h>
