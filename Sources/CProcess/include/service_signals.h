#ifndef TLSAUDIT_SERVICE_SIGNALS_H
#define TLSAUDIT_SERVICE_SIGNALS_H

/// Signals `tlsaudit serve` received since its first instant, counted by a handler installed from
/// an ELF constructor (before the Swift runtime and `main` run). See ServiceSignals.swift.

/// Installs the counting handler for SIGHUP, SIGTERM and SIGINT (idempotent).
void tlsaudit_signals_install(void);
/// SIGHUPs received since the last call (reset to zero).
int tlsaudit_signals_take_hangups(void);
/// SIGTERMs and SIGINTs received so far.
int tlsaudit_signals_terminations(void);

#endif
