import Foundation
import TLSAuditProbe
import TLSAuditProcess
#if canImport(Glibc)
import Glibc
#endif

/// A real server from Debian's packages (Exim, Dovecot, slapd) run for a test: in a temporary
/// directory, on free loopback ports, as `nobody` when the tests run as root, in the foreground
/// (its own process, ended and its directory removed by `stop()`).
public final class LabDaemon: @unchecked Sendable {
    // @unchecked: `process` is set once in init and only terminated after.
    public let directory: String
    private var process: ChildProcess?
    private let asNobody = geteuid() == 0

    init(name: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("tlsaudit-\(name)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    deinit { stop() }

    public func path(_ name: String) -> String { "\(directory)/\(name)" }

    /// Writes a file into the directory.
    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: path(name), atomically: true, encoding: .utf8)
    }

    /// Starts `program` with `arguments` (as nobody, owning the directory, when root), then waits
    /// until every port in `ports` accepts a connection; throws with the server's output otherwise.
    func start(_ program: String, _ arguments: [String], ports: [Int], address: String = "127.0.0.1") throws {
        let process = ChildProcess()
        if asNobody {
            try chownToNobody()
            process.executableURL = URL(fileURLWithPath: try LabPrerequisite.program(["/usr/bin/setpriv"], package: "util-linux"))
            process.arguments = ["--reuid=nobody", "--regid=nogroup", "--clear-groups", program] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: program)
            process.arguments = arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        guard FileManager.default.createFile(atPath: path("output.log"), contents: nil),
              let output = FileHandle(forWritingAtPath: path("output.log")) else {
            throw LabError("cannot write \(path("output.log"))")
        }
        process.standardOutput = output
        process.standardError = output
        try process.run()
        self.process = process
        let deadline = Date().addingTimeInterval(20)
        for port in ports {
            while !Self.accepts(port, address: address) {
                guard process.isRunning, Date() < deadline else {
                    let log = (try? String(contentsOfFile: path("output.log"), encoding: .utf8)) ?? ""
                    stop()
                    throw LabError("\(URL(fileURLWithPath: program).lastPathComponent) did not listen on \(port): \(log.suffix(2000))")
                }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
    }

    /// Ends the server and removes its directory.
    public func stop() {
        if let process, process.isRunning {
            process.terminate()
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
        process = nil
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func chownToNobody() throws {
        let chown = ChildProcess()
        chown.executableURL = URL(fileURLWithPath: "/bin/chown")
        chown.arguments = ["-R", "nobody:nogroup", directory]
        try chown.run()
        chown.waitUntilExit()
    }

    static func accepts(_ port: Int, address host: String = "127.0.0.1") -> Bool {
        guard let address = Resolver.numericAddress(host, port: port) else { return false }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        return address.withSockaddr { connect(fd, $0, $1) } == 0
    }
}

/// Exim 4 (Debian's exim4-daemon-light) as an SMTP server on a free port, offering STARTTLS with
/// the given certificate unless `offerTLS` is false. No mail is accepted.
public final class LabEximServer: Sendable {
    public let port: Int
    private let daemon: LabDaemon

    public init(chainPEM: String, keyPEM: String, offerTLS: Bool = true) throws {
        let exim = try LabPrerequisite.program(["/usr/sbin/exim4", "/usr/sbin/exim"], package: "exim4-daemon-light")
        daemon = try LabDaemon(name: "exim")
        port = try LabPorts.unusedPort()
        try FileManager.default.createDirectory(atPath: daemon.path("spool"), withIntermediateDirectories: true)
        try daemon.write("cert.pem", chainPEM)
        try daemon.write("key.pem", keyPEM)
        try daemon.write("exim.conf", """
            exim_user = nobody
            exim_group = nogroup
            spool_directory = \(daemon.path("spool"))
            log_file_path = \(daemon.path("%slog"))
            primary_hostname = mail.lab.tlsaudit.test
            daemon_smtp_ports = \(port)
            local_interfaces = 127.0.0.1
            keep_environment =
            # No lookups: EHLO [127.0.0.1] would otherwise make Exim ask DNS for the address's name (a
            # query off loopback, and a stall of seconds when no resolver answers); no ident callback.
            helo_lookup_domains =
            host_lookup =
            rfc1413_hosts =
            tls_advertise_hosts = \(offerTLS ? "*" : "")
            tls_certificate = \(daemon.path("cert.pem"))
            tls_privatekey = \(daemon.path("key.pem"))
            acl_smtp_rcpt = refuse_all
            begin acl
            refuse_all:
              deny message = the lab accepts no mail

            """)
        // -C: our own configuration (Exim then runs without its privileges); -bdf: daemon in the foreground.
        try daemon.start(exim, ["-C", daemon.path("exim.conf"), "-bdf", "-oX", "\(port)"], ports: [port])
    }

    public func stop() { daemon.stop() }
}

/// Dovecot 2.3 with IMAP, POP3 and ManageSieve on free ports, STARTTLS with the given certificate
/// (`ssl = no` when `offerTLS` is false).
public final class LabDovecotServer: Sendable {
    public let imapPort: Int
    public let pop3Port: Int
    public let sievePort: Int
    private let daemon: LabDaemon

    public init(chainPEM: String, keyPEM: String, offerTLS: Bool = true) throws {
        let dovecot = try LabPrerequisite.program(["/usr/sbin/dovecot"], package: "dovecot-imapd dovecot-pop3d dovecot-managesieved")
        guard FileManager.default.fileExists(atPath: "/usr/lib/dovecot/managesieve-login") else {
            throw LabPrerequisite.Missing(description: "Dovecot's ManageSieve is not installed: apt-get install -y dovecot-managesieved (.ci/run installs it)")
        }
        daemon = try LabDaemon(name: "dovecot")
        imapPort = try LabPorts.unusedPort()
        pop3Port = try LabPorts.unusedPort()
        sievePort = try LabPorts.unusedPort()
        for folder in ["run", "state", "home"] {
            try FileManager.default.createDirectory(atPath: daemon.path(folder), withIntermediateDirectories: true)
        }
        try daemon.write("cert.pem", chainPEM)
        try daemon.write("key.pem", keyPEM)
        let user = geteuid() == 0 ? "nobody" : String(cString: getpwuid(geteuid()).pointee.pw_name)
        let group = geteuid() == 0 ? "nogroup" : String(cString: getgrgid(getegid()).pointee.gr_name)
        try daemon.write("dovecot.conf", """
            base_dir = \(daemon.path("run"))
            state_dir = \(daemon.path("state"))
            log_path = \(daemon.path("dovecot.log"))
            instance_name = tlsaudit-lab-\(imapPort)
            protocols = imap pop3 sieve
            listen = 127.0.0.1
            ssl = \(offerTLS ? "yes" : "no")
            ssl_cert = <\(daemon.path("cert.pem"))
            ssl_key = <\(daemon.path("key.pem"))
            default_internal_user = \(user)
            default_internal_group = \(group)
            default_login_user = \(user)
            mail_location = maildir:\(daemon.path("home"))/Maildir
            passdb {
              driver = static
              args = password=unused
            }
            userdb {
              driver = static
              args = uid=\(user) gid=\(group) home=\(daemon.path("home"))
            }
            service anvil {
              chroot =
            }
            service imap-login {
              chroot =
              inet_listener imap {
                port = \(imapPort)
              }
              inet_listener imaps {
                port = 0
              }
            }
            service pop3-login {
              chroot =
              inet_listener pop3 {
                port = \(pop3Port)
              }
              inet_listener pop3s {
                port = 0
              }
            }
            service managesieve-login {
              chroot =
              inet_listener sieve {
                port = \(sievePort)
              }
            }

            """)
        try daemon.start(dovecot, ["-F", "-c", daemon.path("dovecot.conf")], ports: [imapPort, pop3Port, sievePort])
    }

    public func stop() { daemon.stop() }
}

/// OpenLDAP's slapd with no database, answering the StartTLS operation with the given certificate
/// (without one, it answers that StartTLS is not supported).
public final class LabSlapdServer: Sendable {
    public let port: Int
    private let daemon: LabDaemon

    public init(chainPEM: String?, keyPEM: String?) throws {
        let slapd = try LabPrerequisite.program(["/usr/sbin/slapd"], package: "slapd")
        daemon = try LabDaemon(name: "slapd")
        port = try LabPorts.unusedPort()
        var configuration = """
            include /etc/ldap/schema/core.schema
            pidfile \(daemon.path("slapd.pid"))
            argsfile \(daemon.path("slapd.args"))

            """
        if let chainPEM, let keyPEM {
            try daemon.write("cert.pem", chainPEM)
            try daemon.write("key.pem", keyPEM)
            configuration += "TLSCertificateFile \(daemon.path("cert.pem"))\nTLSCertificateKeyFile \(daemon.path("key.pem"))\n"
        }
        try daemon.write("slapd.conf", configuration)
        // -d 0: stay in the foreground, logging nothing.
        try daemon.start(slapd, ["-d", "0", "-h", "ldap://127.0.0.1:\(port)/", "-f", daemon.path("slapd.conf")], ports: [port])
    }

    public func stop() { daemon.stop() }
}

/// nginx (Debian's package) with TLS server blocks the test writes (the `server { ... }` bodies'
/// TLS lines), on a free port, in the foreground. `listen` and the certificate lines are added.
public final class LabNginxServer: Sendable {
    public let port: Int
    private let daemon: LabDaemon

    /// `servers`: each server block's extra directives, with its chain and key in PEM; the first is
    /// the default server (what a client without SNI gets), the others answer their `server_name`.
    /// `http2`: HTTP/2 on the port (nginx 1.22 says so on the `listen` line).
    /// `address`: a loopback address to listen on (127.0.0.1 unless told).
    public init(servers: [(directives: String, chainPEM: String, keyPEM: String)], http: String = "", http2: Bool = false,
                address: String = "127.0.0.1") throws {
        let nginx = try LabPrerequisite.program(["/usr/sbin/nginx"], package: "nginx")
        daemon = try LabDaemon(name: "nginx")
        port = try LabPorts.unusedPort()
        var blocks = ""
        for (index, server) in servers.enumerated() {
            try daemon.write("chain\(index).pem", server.chainPEM)
            try daemon.write("key\(index).pem", server.keyPEM)
            blocks += """
                  server {
                    listen \(address):\(port) ssl\(http2 ? " http2" : "")\(index == 0 ? " default_server" : "");
                    ssl_certificate \(daemon.path("chain\(index).pem"));
                    ssl_certificate_key \(daemon.path("key\(index).pem"));
                    \(server.directives)
                    location / { return 200 "ok\\n"; }
                  }

                """
        }
        try daemon.write("nginx.conf", """
            worker_processes 1;
            pid \(daemon.path("nginx.pid"));
            error_log \(daemon.path("error.log"));
            events { worker_connections 256; }
            http {
              access_log off;
              client_body_temp_path \(daemon.path("body"));
              proxy_temp_path \(daemon.path("proxy"));
              fastcgi_temp_path \(daemon.path("fastcgi"));
              uwsgi_temp_path \(daemon.path("uwsgi"));
              scgi_temp_path \(daemon.path("scgi"));
              \(http)
            \(blocks)}

            """)
        try daemon.start(nginx, ["-c", daemon.path("nginx.conf"), "-p", daemon.directory, "-g", "daemon off;"], ports: [port],
                         address: address)
    }

    public func stop() { daemon.stop() }
}

/// `openssl s_server -www` on a free port with a certificate (leaf first in `certificatePEM`, then
/// its chain) and any further flags (`-client_renegotiation`, `-no_ticket`, ...).
public final class LabOpenSSLServer: Sendable {
    public let port: Int
    private let daemon: LabDaemon

    public init(certificatePEM: String, keyPEM: String, arguments: [String] = []) throws {
        let openssl = try LabPrerequisite.program(["/usr/bin/openssl"], package: "openssl")
        daemon = try LabDaemon(name: "s_server")
        port = try LabPorts.unusedPort()
        try daemon.write("chain.pem", certificatePEM)
        try daemon.write("key.pem", keyPEM)
        try daemon.start(openssl, ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", daemon.path("chain.pem"),
                                   "-cert_chain", daemon.path("chain.pem"), "-key", daemon.path("key.pem"), "-www", "-quiet"] + arguments,
                         ports: [port])
    }

    public func stop() { daemon.stop() }
}

/// A plain HTTP server that answers every request with one status and, for a redirect, a
/// Location (the port-80 side of an HTTPS site), on `address`:`port` (port 80 needs root).
public final class LabPlainHTTPAnswer: Sendable {
    private let listener: LabListener

    public init(address: String, port: Int, status: Int, location: String?) throws {
        let head = "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Moved Permanently")\r\n" + (location.map { "Location: \($0)\r\n" } ?? "")
            + "Content-Length: 0\r\nConnection: close\r\n\r\n"
        listener = try LabListener(address: address, port: port) { fd in
            LabListener.setTimeouts(fd, seconds: 5)
            let connection = LabConnection(fd)
            _ = connection.read(through: Array("\r\n\r\n".utf8))
            connection.send(head)
            close(fd)
        }
    }

    public func stop() { listener.stop() }
}

/// GnuTLS's `gnutls-serv` on a free loopback port with a certificate (leaf first in
/// `certificatePEM`, then its chain) and a GnuTLS priority string: the second TLS library of the
/// referee tests, and the one that still speaks what OpenSSL 3 cannot (RC4, 3DES with SSLv3, RFC
/// 7919 groups in TLS 1.2), e.g. `NORMAL:+ARCFOUR-128:+3DES-CBC:+DHE-RSA:+GROUP-FFDHE2048`.
/// `http`: answer HTTP requests (`--http`), else echo.
public final class LabGnuTLSServer: Sendable {
    public let port: Int
    private let daemon: LabDaemon

    public init(certificatePEM: String, keyPEM: String, priority: String, http: Bool = true, arguments: [String] = []) throws {
        let program = try LabPrerequisite.program(["/usr/bin/gnutls-serv"], package: "gnutls-bin")
        daemon = try LabDaemon(name: "gnutls-serv")
        port = try LabPorts.unusedPort()
        try daemon.write("chain.pem", certificatePEM)
        try daemon.write("key.pem", keyPEM)
        try daemon.start(program, ["--port", String(port), "--x509certfile", daemon.path("chain.pem"), "--x509keyfile", daemon.path("key.pem"),
                                   "--priority", priority, "--quiet"] + (http ? ["--http"] : ["--echo"]) + arguments,
                         ports: [port])
    }

    public func stop() { daemon.stop() }
}
