import Foundation
import Testing
@testable import TLSAuditService

/// The scheduler's due-time heap and its one-minute counter: what they give must equal what
/// sorting everything (the scheduler's former way) and keeping every timestamp would give.
@Suite("the scheduler's due queue and minute counter")
struct DueQueueTests {
    @Test("items come out earliest first, as sorting them would give, however they were added (heapified, pushed, mixed with pops)")
    func order() {
        var generator = SystemRandomNumberGenerator()
        let base = SchedulerTime(seconds: 1_800_000)
        for size in [0, 1, 2, 7, 100, 5_000] {
            let items = (0..<size).map { DueQueue.Item(due: base.adding(Double.random(in: 0...1000, using: &generator)), key: "t\($0)") }
            var heapified = DueQueue(items)
            var pushed = DueQueue()
            for item in items { pushed.push(item) }
            let sorted = items.map(\.due).sorted()
            for queue in [heapified, pushed] {
                var copy = queue
                var out: [SchedulerTime] = []
                while let item = copy.popFirst() { out.append(item.due) }
                #expect(out == sorted, "size \(size)")
            }
            // Interleaved: pop half, push them back later, still in order.
            var popped: [DueQueue.Item] = []
            for _ in 0..<(size / 2) { if let item = heapified.popFirst() { popped.append(item) } }
            #expect(popped.map(\.due) == Array(sorted.prefix(size / 2)))
            for item in popped { heapified.push(item) }
            var out: [SchedulerTime] = []
            while let item = heapified.popFirst() { out.append(item.due) }
            #expect(out == sorted)
        }
    }

    @Test("countDue counts exactly the items due at a time, up to its limit")
    func countDue() {
        let base = SchedulerTime(seconds: 1_800_000)
        let queue = DueQueue((0..<1000).map { DueQueue.Item(due: base.adding(Double($0 % 100)), key: "t\($0)") })
        #expect(queue.countDue(at: base.adding(-1), limit: .max) == 0)
        #expect(queue.countDue(at: base.adding(9.5), limit: .max) == 100)
        #expect(queue.countDue(at: base.adding(99), limit: .max) == 1000)
        #expect(queue.countDue(at: base.adding(99), limit: 10) == 10)
    }

    @Test("the minute counter counts the events of the last 60 seconds, forgetting older ones")
    func minuteCounter() {
        var counter = MinuteCounter()
        for second in 0..<120 { for _ in 0..<(second % 3 + 1) { counter.record(at: Double(second) + 0.5) } }
        // Seconds 60...119: each contributes second % 3 + 1 events.
        #expect(counter.count(at: 119.9) == (60..<120).reduce(0) { $0 + $1 % 3 + 1 })
        #expect(counter.count(at: 200) == 0)
    }
}
