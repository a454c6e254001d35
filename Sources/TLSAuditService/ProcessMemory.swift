import CProcess

/// How the long-running service, and the commands that run once, use glibc's allocator.
public enum ProcessMemory {
    /// Buffers of 64 KiB and more (a metrics scrape's chunks, SwiftNIO's, the store's batches) are
    /// mapped and unmapped whole instead of settling in malloc's arenas. Measured with bench case
    /// (c), 10,000 targets for 2 minutes: RSS 66.3 MiB instead of 71.2 without the listener, and
    /// 70.2 instead of 79.6 with it scraped every second.
    static func tuneForService() {
        tlsaudit_set_mmap_threshold(64 * 1024)
    }

    /// Gives the allocator's free pages back to the system: after the configuration is read (a
    /// 100,000-target file's parse leaves tens of MiB free in malloc's arenas, counted in RSS).
    static func releaseFreeMemory() {
        tlsaudit_release_free_memory()
    }

    /// For `scan`, which runs once and exits: glibc's malloc grows a thread's heap by what each
    /// allocation lacks, one mprotect(2) per 4 KiB page (790 of them in a 200-target scan, each
    /// taking the address space's lock from the threads faulting pages in); padded to 1 MiB, 500.
    /// Measured: 0.99x the CPU of a 200-target scan (the pad set from the process's start, through
    /// GLIBC_TUNABLES: 0.96x of a one-target scan). Setting the pad also fixes glibc's mmap and
    /// trim thresholds at 128 KiB (they no longer rise after a large block is freed), so other
    /// commands, not measured with it, and the service keep the defaults.
    public static func tuneForScan() {
        tlsaudit_set_top_pad(1 << 20)
    }
}
