public import Foundation

/// Plain fixed-width tables for the terminal.
public enum TextTable {
    public static func render(header: [String], rows: [[String]]) -> String {
        let widths = header.indices.map { column in
            ([header[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                index == cells.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ") + "\n"
        }
        return line(header) + rows.map(line).joined()
    }

    /// `42s ago`, `5m ago`, `3h ago`, `2d ago`.
    public static func age(_ date: Date, now: Date) -> String {
        let seconds = max(0, Int(now.timeIntervalSince(date)))
        switch seconds {
        case ..<120: return "\(seconds)s ago"
        case ..<7200: return "\(seconds / 60)m ago"
        case ..<172_800: return "\(seconds / 3600)h ago"
        default: return "\(seconds / 86_400)d ago"
        }
    }
}
