// swift-tools-version: 6.0
import PackageDescription

/// Swift 6 language mode everywhere; internal imports by default so that no
/// C type (OpenSSL pointers in particular) can leak into a public API.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "tlsaudit",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tlsaudit", targets: ["tlsaudit"]),
        .library(name: "TLSAuditCore", targets: ["TLSAuditCore"]),
        .library(name: "TLSAuditProbe", targets: ["TLSAuditProbe"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
    ],
    targets: [
        // OpenSSL 3 headers and libraries, plus inline wrappers for the macros Swift cannot import.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // The domain: certificates, handshake observations, trust and ATS policies, findings, output.
        // Pure Swift: no C, no sockets.
        .target(
            name: "TLSAuditCore",
            swiftSettings: swiftSettings
        ),
        // The only module that touches OpenSSL: sockets, handshakes, certificate parsing,
        // chain building, and the loopback lab (test PKI and in-process TLS servers).
        .target(
            name: "TLSAuditProbe",
            dependencies: ["COpenSSL", "TLSAuditCore"],
            swiftSettings: swiftSettings
        ),
        // The command-line front end: argument parsing and presentation only.
        .executableTarget(
            name: "tlsaudit",
            dependencies: [
                "TLSAuditCore",
                "TLSAuditProbe",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TLSAuditCoreTests",
            dependencies: ["TLSAuditCore"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TLSAuditScanTests",
            // Depends on the executable so that `swift test` builds the binary the tests run.
            dependencies: ["TLSAuditCore", "TLSAuditProbe", "tlsaudit"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
