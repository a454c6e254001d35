#if canImport(Glibc)
import Glibc
#endif

/// Writing whole buffers to a file descriptor, as every writer of tlsaudit needs it: again after
/// EINTR and short writes, waiting for room on a non-blocking descriptor (a pipe its reader set
/// O_NONBLOCK on).
public enum DescriptorWrites {
    /// Writes all of `buffer` to `descriptor`; the errno of the first failure, nil when all of it went.
    public static func writeAll(_ buffer: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
        var offset = 0
        while offset < buffer.count {
            let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
            if written > 0 { offset += written; continue }
            if written < 0, errno == EINTR { continue }
            if written < 0, errno == EAGAIN || errno == EWOULDBLOCK {
                var entry = pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0)
                if poll(&entry, 1, -1) >= 0 || errno == EINTR { continue }
                return errno
            }
            return written < 0 ? errno : EIO // write(2) never takes nothing of a non-empty buffer
        }
        return nil
    }
}
