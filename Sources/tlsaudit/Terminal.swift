import Foundation
import Synchronization

enum Terminal {
    static func isTTY(_ descriptor: Int32) -> Bool { isatty(descriptor) == 1 }
}

/// A single self-overwriting progress line on stderr, shown only on a terminal.
final class ProgressLine: Sendable {
    private let enabled: Bool
    private let lastDrawn = Mutex<ContinuousClock.Instant?>(nil)

    init(enabled: Bool) { self.enabled = enabled }

    func update(done: Int, total: Int) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let draw = lastDrawn.withLock { last -> Bool in
            // At most ten redraws a second, and always the last one.
            guard done == total || last.map({ now - $0 > .milliseconds(100) }) ?? true else { return false }
            last = now
            return true
        }
        if draw { FileHandle.standardError.write(Data("\r\u{1B}[Kscanning: \(done)/\(total) addresses".utf8)) }
    }

    func finish() {
        guard enabled else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[K".utf8))
    }
}
