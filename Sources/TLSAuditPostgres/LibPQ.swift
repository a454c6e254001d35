import CLibPQ
import Foundation
import TLSAuditStore

/// libpq's functions, loaded with dlopen when the first PostgreSQL connection is made. Linked
/// instead, libpq and what it pulls in (Kerberos, LDAP, GnuTLS, SASL: 19 libraries) cost every
/// tlsaudit process about 3 ms of CPU at start-up, while only a fleet or a `postgres://` store
/// uses them (measured with two empty C programs, with and without `-lpq`). The header
/// still gives the types; these signatures follow `libpq-fe.h`.
struct LibPQ: @unchecked Sendable {
    // @unchecked: function pointers, set once.
    let connectdb: @convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?
    let finish: @convention(c) (OpaquePointer?) -> Void
    let status: @convention(c) (OpaquePointer?) -> ConnStatusType
    let transactionStatus: @convention(c) (OpaquePointer?) -> PGTransactionStatusType
    let errorMessage: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let socket: @convention(c) (OpaquePointer?) -> Int32
    let exec: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?
    let execParams: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?,
                                    UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?,
                                    Int32) -> OpaquePointer?
    let prepare: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?) -> OpaquePointer?
    let execPrepared: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<UnsafePointer<CChar>?>?,
                                      UnsafePointer<Int32>?, UnsafePointer<Int32>?, Int32) -> OpaquePointer?
    let resultStatus: @convention(c) (OpaquePointer?) -> ExecStatusType
    let resultErrorMessage: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let resultErrorField: @convention(c) (OpaquePointer?, Int32) -> UnsafeMutablePointer<CChar>?
    let ntuples: @convention(c) (OpaquePointer?) -> Int32
    let nfields: @convention(c) (OpaquePointer?) -> Int32
    let fname: @convention(c) (OpaquePointer?, Int32) -> UnsafeMutablePointer<CChar>?
    let cmdTuples: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let getvalue: @convention(c) (OpaquePointer?, Int32, Int32) -> UnsafeMutablePointer<CChar>?
    let getlength: @convention(c) (OpaquePointer?, Int32, Int32) -> Int32
    let getisnull: @convention(c) (OpaquePointer?, Int32, Int32) -> Int32
    let clear: @convention(c) (OpaquePointer?) -> Void
    let consumeInput: @convention(c) (OpaquePointer?) -> Int32
    let notifies: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<PGnotify>?
    let freemem: @convention(c) (UnsafeMutableRawPointer?) -> Void
    let host: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?
    let port: @convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?

    /// The loaded library, or why it could not be loaded (asked for again by each connection
    /// attempt's error, never retried: a missing libpq5 stays missing until a restart).
    static let loaded: Result<LibPQ, StoreError> = {
        let name = "libpq.so.5"
        guard let library = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
            let reason = dlerror().map { String(cString: $0) } ?? "not found"
            return .failure(StoreError(.unavailable, "cannot load PostgreSQL's client library (\(reason)): apt-get install -y libpq5"))
        }
        var missing: [String] = []
        // A missing function gets a placeholder that is never called: the load fails below.
        func symbol<T>(_ symbolName: String, as type: T.Type) -> T {
            guard let address = dlsym(library, symbolName) else {
                missing.append(symbolName)
                return unsafeBitCast(UnsafeMutableRawPointer(bitPattern: 1)!, to: type)
            }
            return unsafeBitCast(address, to: type)
        }
        let api = LibPQ(
            connectdb: symbol("PQconnectdb", as: (@convention(c) (UnsafePointer<CChar>?) -> OpaquePointer?).self),
            finish: symbol("PQfinish", as: (@convention(c) (OpaquePointer?) -> Void).self),
            status: symbol("PQstatus", as: (@convention(c) (OpaquePointer?) -> ConnStatusType).self),
            transactionStatus: symbol("PQtransactionStatus", as: (@convention(c) (OpaquePointer?) -> PGTransactionStatusType).self),
            errorMessage: symbol("PQerrorMessage", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?).self),
            socket: symbol("PQsocket", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            exec: symbol("PQexec", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?).self),
            execParams: symbol("PQexecParams", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32, UnsafePointer<Oid>?,
                                                                    UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                                                                    UnsafePointer<Int32>?, Int32) -> OpaquePointer?).self),
            prepare: symbol("PQprepare", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, UnsafePointer<CChar>?, Int32,
                                                              UnsafePointer<Oid>?) -> OpaquePointer?).self),
            execPrepared: symbol("PQexecPrepared", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?, Int32,
                                                                        UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                                                                        UnsafePointer<Int32>?, Int32) -> OpaquePointer?).self),
            resultStatus: symbol("PQresultStatus", as: (@convention(c) (OpaquePointer?) -> ExecStatusType).self),
            resultErrorMessage: symbol("PQresultErrorMessage", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?).self),
            resultErrorField: symbol("PQresultErrorField", as: (@convention(c) (OpaquePointer?, Int32) -> UnsafeMutablePointer<CChar>?).self),
            ntuples: symbol("PQntuples", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            nfields: symbol("PQnfields", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            fname: symbol("PQfname", as: (@convention(c) (OpaquePointer?, Int32) -> UnsafeMutablePointer<CChar>?).self),
            cmdTuples: symbol("PQcmdTuples", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?).self),
            getvalue: symbol("PQgetvalue", as: (@convention(c) (OpaquePointer?, Int32, Int32) -> UnsafeMutablePointer<CChar>?).self),
            getlength: symbol("PQgetlength", as: (@convention(c) (OpaquePointer?, Int32, Int32) -> Int32).self),
            getisnull: symbol("PQgetisnull", as: (@convention(c) (OpaquePointer?, Int32, Int32) -> Int32).self),
            clear: symbol("PQclear", as: (@convention(c) (OpaquePointer?) -> Void).self),
            consumeInput: symbol("PQconsumeInput", as: (@convention(c) (OpaquePointer?) -> Int32).self),
            notifies: symbol("PQnotifies", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<PGnotify>?).self),
            freemem: symbol("PQfreemem", as: (@convention(c) (UnsafeMutableRawPointer?) -> Void).self),
            host: symbol("PQhost", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?).self),
            port: symbol("PQport", as: (@convention(c) (OpaquePointer?) -> UnsafeMutablePointer<CChar>?).self))
        guard missing.isEmpty else {
            return .failure(StoreError(.unavailable, "\(name) lacks \(missing.joined(separator: ", ")): libpq 9.0 or later is needed"))
        }
        return .success(api)
    }()

    /// The library, once a connection was made (every result and connection object comes after one).
    static var api: LibPQ {
        guard case .success(let api) = loaded else { preconditionFailure("libpq is used before a connection loaded it") }
        return api
    }
}
