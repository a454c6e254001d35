#include "service_signals.h"

#include <stdatomic.h>
#include <signal.h>
#include <string.h>

// Lock-free atomics: safe in a handler running on any thread, and read-and-reset without a race.
static atomic_int hangups;
static atomic_int terminations;
static atomic_int first_termination; // the signal number of the first termination signal
static atomic_int installed;
// The termination signals tlsaudit_signals_install_termination caught (bit 0 SIGTERM, bit 1
// SIGINT, bit 2 SIGHUP): the first of them changes their disposition in the handler itself
// (default_termination).
static atomic_int caught_termination;
static const int termination_signals[] = {SIGTERM, SIGINT, SIGHUP};
// Set when the first termination left SIGHUP ignored (a closing session sends it more than once:
// the shell passes it on, then the kernel sends it to the old foreground group); restored by
// tlsaudit_signals_default_termination.
static atomic_int hangup_ignored;

/// Sets `signal_number`'s disposition (SIG_DFL or SIG_IGN). sigaction is async-signal-safe:
/// this runs in the handler too.
static void set_disposition(int signal_number, void (*disposition)(int)) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = disposition;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, 0);
}

/// SIGTERM and SIGINT get their default action back; SIGHUP is ignored from then on, so that only
/// a second Ctrl-C or SIGTERM ends the process at once. Runs in the handler too.
static void default_termination(void) {
    int caught = atomic_exchange(&caught_termination, 0);
    for (unsigned i = 0; i < sizeof termination_signals / sizeof *termination_signals; i++) {
        if (!(caught & (1 << i))) continue;
        if (termination_signals[i] == SIGHUP) {
            set_disposition(SIGHUP, SIG_IGN);
            atomic_store(&hangup_ignored, 1);
        } else {
            set_disposition(termination_signals[i], SIG_DFL);
        }
    }
}

/// A termination: counted, the first one's number kept, the caught signals' dispositions changed.
static void record_termination(int signal_number) {
    int none = 0;
    atomic_compare_exchange_strong(&first_termination, &none, signal_number);
    atomic_fetch_add(&terminations, 1);
    default_termination();
}

/// The service's handler: SIGHUP asks for a reload, SIGTERM and SIGINT for the end.
static void record(int signal_number) {
    if (signal_number == SIGHUP) {
        atomic_fetch_add(&hangups, 1);
    } else {
        record_termination(signal_number);
    }
}

void tlsaudit_signals_install(void) {
    if (atomic_exchange(&installed, 1)) return;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = record;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(SIGHUP, &action, 0);
    sigaction(SIGTERM, &action, 0);
    sigaction(SIGINT, &action, 0);
    // The unit starts serve through `env --block-signal=HUP,TERM,INT`, so that a signal sent while
    // the dynamic loader still runs (no code of ours can) waits, pending; it is delivered here.
    sigset_t ours;
    sigemptyset(&ours);
    sigaddset(&ours, SIGHUP);
    sigaddset(&ours, SIGTERM);
    sigaddset(&ours, SIGINT);
    sigprocmask(SIG_UNBLOCK, &ours, 0);
}

void tlsaudit_signals_install_termination(void) {
    struct sigaction action, previous;
    memset(&action, 0, sizeof action);
    // SIGHUP too: a closed terminal or a dropped ssh session ends a run as Ctrl-C does.
    action.sa_handler = record_termination;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (unsigned i = 0; i < sizeof termination_signals / sizeof *termination_signals; i++) {
        // A signal ignored when the process started stays ignored (`cmd &` in a non-interactive
        // shell ignores SIGINT, `nohup` SIGHUP).
        if (sigaction(termination_signals[i], 0, &previous) == 0 && previous.sa_handler == SIG_IGN) continue;
        atomic_fetch_or(&caught_termination, 1 << i);
        if (sigaction(termination_signals[i], &action, 0) != 0) atomic_fetch_and(&caught_termination, ~(1 << i));
    }
}

void tlsaudit_signals_default_termination(void) {
    default_termination();
    if (atomic_exchange(&hangup_ignored, 0)) set_disposition(SIGHUP, SIG_DFL);
}

int tlsaudit_signals_first_termination(void) { return atomic_load(&first_termination); }

int tlsaudit_signals_take_hangups(void) { return atomic_exchange(&hangups, 0); }

int tlsaudit_signals_terminations(void) { return atomic_load(&terminations); }

/// glibc passes argc and argv to the functions of the executable's .preinit_array, and runs them
/// right after relocation, before any shared library's initializers (the Swift runtime, Foundation)
/// and `main`: `tlsaudit serve ...` catches its signals there (a SIGHUP during those once killed it).
static void install_for_serve(int argc, char **argv, char **envp) {
    (void)envp;
    if (argc > 1 && argv && argv[1] && strcmp(argv[1], "serve") == 0) tlsaudit_signals_install();
}

__attribute__((section(".preinit_array"), used))
static void (*const tlsaudit_preinit)(int, char **, char **) = install_for_serve;
