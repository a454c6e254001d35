import Foundation

/// The targets by due time: a binary min-heap, O(log n) to add one or take the earliest, so each
/// scheduling decision costs the same with 100 targets or 100,000. An item is not removed when its
/// target's due time changes: the new time is added, and the old item, when it comes up, is told
/// stale by the scheduler (it no longer matches the target's due time) and dropped.
struct DueQueue {
    struct Item {
        var due: SchedulerTime
        var key: String
    }

    private var heap: [Item] = []

    init() {}

    /// All of `items`, heapified in O(n).
    init(_ items: some Sequence<Item>) {
        heap = Array(items)
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
    }

    var count: Int { heap.count }

    /// The earliest item.
    var first: Item? { heap.first }

    mutating func push(_ item: Item) {
        heap.append(item)
        siftUp(heap.count - 1)
    }

    @discardableResult
    mutating func popFirst() -> Item? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let first = heap.removeLast()
        if !heap.isEmpty { siftDown(0) }
        return first
    }

    /// How many items are due at `now`, counting at most `limit`: visits only the due ones (the
    /// heap order prunes the rest).
    func countDue(at now: SchedulerTime, limit: Int) -> Int {
        var count = 0
        var pending = heap.isEmpty ? [] : [0]
        while let index = pending.popLast(), count < limit {
            guard heap[index].due <= now else { continue }
            count += 1
            for child in [2 * index + 1, 2 * index + 2] where child < heap.count { pending.append(child) }
        }
        return count
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].due < heap[parent].due else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].due < heap[smallest].due { smallest = left }
            if right < heap.count, heap[right].due < heap[smallest].due { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}

/// Events per second over the last minute, in 60 one-second buckets: O(1) to record and to count
/// (a list of timestamps swept on every completion cost O(scans per minute) each time).
struct MinuteCounter {
    private var buckets = [Int](repeating: 0, count: 60)
    private var seconds = [Int](repeating: -1, count: 60)

    mutating func record(at uptime: Double) {
        let second = Int(uptime)
        let slot = second % 60
        if seconds[slot] != second {
            seconds[slot] = second
            buckets[slot] = 0
        }
        buckets[slot] += 1
    }

    /// Events in the 60 seconds up to `uptime`.
    func count(at uptime: Double) -> Int {
        let now = Int(uptime)
        return (0..<60).reduce(0) { sum, slot in now - seconds[slot] < 60 && seconds[slot] >= 0 ? sum + buckets[slot] : sum }
    }
}

/// A moment on the scheduler's clock: seconds on CLOCK_MONOTONIC (`systemUptime`), which a
/// wall-clock step (NTP, a VM restored from a snapshot, `date -s`) does not move. Due times,
/// backoffs and polls are kept in it; wall-clock time is only for what is recorded.
struct SchedulerTime: Comparable, Hashable {
    var seconds: Double

    static var now: SchedulerTime { SchedulerTime(seconds: ProcessInfo.processInfo.systemUptime) }
    static let distantPast = SchedulerTime(seconds: -.greatestFiniteMagnitude)

    func adding(_ interval: Double) -> SchedulerTime { SchedulerTime(seconds: seconds + interval) }

    /// Seconds from `other` to this moment.
    func interval(since other: SchedulerTime) -> Double { seconds - other.seconds }

    static func < (a: SchedulerTime, b: SchedulerTime) -> Bool { a.seconds < b.seconds }
}
