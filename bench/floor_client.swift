// The memory floor of case (a) in Swift, for bench/run: the same job as bench/floor_client.c (one
// verified handshake per "host:port" line of TARGETS, to 127.0.0.1, one after the other, each
// verdict kept), written with the standard library and tlsaudit's COpenSSL module only (no
// Foundation), linked as tlsaudit is installed (the Swift runtime statically). Prints "verified N of M".
//
//   swiftc -O -static-stdlib -I Sources/COpenSSL bench/floor_client.swift -o floor_client_swift
//   ./floor_client_swift TARGETS CA
import COpenSSL
import Glibc

let arguments = CommandLine.arguments
guard arguments.count == 3, let targets = fopen(arguments[1], "r"),
      let context = SSL_CTX_new(TLS_client_method()),
      SSL_CTX_load_verify_locations(context, arguments[2], nil) == 1 else {
    fputs("usage: floor_client_swift TARGETS CA (both readable)\n", stderr)
    exit(2)
}
var verdicts: [String] = []
var verified = 0
var buffer = [CChar](repeating: 0, count: 512)
while fgets(&buffer, Int32(buffer.count), targets) != nil {
    let line = String(cString: buffer).split(separator: "\n").first.map(String.init) ?? ""
    guard let colon = line.lastIndex(of: ":"), let port = UInt16(line[line.index(after: colon)...]) else { continue }
    let host = String(line[..<colon])
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard fd >= 0, connected == 0 else { perror("connect"); exit(1) }
    let ssl = SSL_new(context)
    SSL_set_fd(ssl, fd)
    _ = tlsaudit_SSL_set_tlsext_host_name(ssl, host)
    SSL_set1_host(ssl, host)
    let ok = SSL_connect(ssl) == 1 && SSL_get_verify_result(ssl) == X509_V_OK
    if ok { verified += 1 }
    let cipher = String(cString: SSL_CIPHER_get_name(SSL_get_current_cipher(ssl)))
    verdicts.append("\(line) \(ok ? "verified" : "failed") \(cipher)")
    SSL_free(ssl)
    close(fd)
}
print("verified \(verified) of \(verdicts.count)")
