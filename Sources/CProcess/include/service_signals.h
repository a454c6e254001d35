#ifndef TLSAUDIT_SERVICE_SIGNALS_H
#define TLSAUDIT_SERVICE_SIGNALS_H

/// Signals `tlsaudit serve` received since its first instant, counted by a handler installed from
/// an ELF constructor (before the Swift runtime and `main` run). See ServiceSignals.swift.

/// Installs the counting handler for SIGHUP, SIGTERM and SIGINT (idempotent).
void tlsaudit_signals_install(void);
/// SIGHUPs received since the last call (reset to zero).
int tlsaudit_signals_take_hangups(void);
/// Termination signals received so far.
int tlsaudit_signals_terminations(void);
/// Installs the counting handler for SIGTERM, SIGINT and SIGHUP as terminations (a command that
/// stops gracefully), except for one that was ignored when the process started. The first of them
/// received gives SIGTERM and SIGINT their default action back (from the handler), so that the
/// next one ends the process, and leaves SIGHUP ignored (a closing session sends it twice).
void tlsaudit_signals_install_termination(void);
/// Gives the signals the call above caught their default action again (SIGHUP too).
void tlsaudit_signals_default_termination(void);
/// The first termination signal received (its number), or 0.
int tlsaudit_signals_first_termination(void);

#endif
