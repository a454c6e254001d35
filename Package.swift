// swift-tools-version: 6.1
import PackageDescription

/// Swift 6 language mode everywhere; internal imports by default so that no
/// C type (OpenSSL pointers in particular) can leak into a public API.
///
/// Concrete type metadata through direct accessors, not mangled names: by default the compiler
/// asks the runtime for a generic type such as `Option<Format>` or a Codable container by its
/// mangled name, and the runtime then demangles it and checks each generic requirement by
/// scanning every protocol conformance record of the binary (10,000 in the static build, about
/// 35 us a scan): a one-target `scan` made 122 such scans, 83 with this flag, and starts about a
/// tenth faster (README, "Performance"). The cost is a slightly larger binary; an unsafe flag, so
/// this package cannot be a remote dependency of another (it is an application).
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .unsafeFlags(["-Xfrontend", "-disable-concrete-type-metadata-mangled-name-accessors"]),
]

let package = Package(
    name: "tlsaudit",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "tlsaudit", targets: ["tlsaudit"]),
        .library(name: "TLSAuditCore", targets: ["TLSAuditCore"]),
        .library(name: "TLSAuditProbe", targets: ["TLSAuditProbe"]),
    ],
    // What only some users need, off by default so that the first build is shorter (README, "Build cost").
    traits: [
        .trait(name: "ListenerTLS", description: """
            HTTPS for the service's HTTP listener (`http: tls:`), through swift-nio-ssl and its BoringSSL: \
            about a fifth of a clean build. Without it the listener serves plain HTTP and check-config refuses `http: tls:`. \
            `swift build --traits ListenerTLS`; scripts/package and the tests enable it.
            """),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams", exact: "6.2.2"),
        .package(url: "https://github.com/groue/GRDB.swift", exact: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", exact: "2.13.0"),
        // The HTTP listener (metrics, health, API): see README "Monitoring" for why Hummingbird.
        .package(url: "https://github.com/hummingbird-project/hummingbird", exact: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-prometheus", exact: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", exact: "2.5.0"),
        // Hummingbird's own foundations, named because the listener imports their modules (the
        // versions Hummingbird 2.28.1 resolves to here; declared, not added).
        .package(url: "https://github.com/apple/swift-nio", exact: "2.101.3"),
        .package(url: "https://github.com/apple/swift-nio-ssl", exact: "2.37.6"),
        .package(url: "https://github.com/apple/swift-http-types", exact: "1.8.0"),
    ],
    targets: [
        // OpenSSL 3 headers and libraries, plus inline wrappers for the macros Swift cannot import.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // libpq's header, PostgreSQL's C client (Debian's libpq-dev), for the PostgreSQL store only:
        // the library itself is loaded when the first connection is made (TLSAuditPostgres/LibPQ.swift).
        .systemLibrary(
            name: "CLibPQ",
            providers: [.apt(["libpq-dev"])]
        ),
        // zlib's header (Debian's zlib1g-dev): raw inflate of .ipa entries (TLSAuditApp) and gzip
        // answers over HTTP, as static-ct-api logs send their tiles (TLSAuditProbe).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // C sources for what Swift cannot say about the process: `tlsaudit serve`'s
        // signal handler, installed by an ELF constructor before the Swift runtime starts (a SIGHUP
        // during start-up killed the service), and glibc's malloc_trim (after a metrics scrape).
        .target(name: "CProcess"),
        // The OpenSSL library context the probe's handshakes run in: the default provider with only
        // the key decoders a handshake uses (OpenSSL 3.0 builds a decoder chain per certificate,
        // asking every decoder). C, as an OpenSSL provider is a C dispatch table.
        .target(name: "COpenSSLProbeLibrary", dependencies: ["COpenSSL"]),
        // What any module may need and no domain knows: the JSON document encoder (Foundation's
        // bytes, faster), ISO 8601 timestamps, a lock whose waiters sleep, whole writes to a
        // descriptor, hex, a host written before :port. Pure Swift.
        .target(
            name: "TLSAuditSupport",
            swiftSettings: swiftSettings
        ),
        // Child processes started with posix_spawn (CProcess's file actions): the service's command
        // sinks, the lab's servers and tools, the tests' runs of the binary. Foundation's Process
        // can crash the whole process on Linux (swift-corelibs-foundation #5472).
        .target(
            name: "TLSAuditProcess",
            dependencies: ["CProcess", "TLSAuditSupport"],
            swiftSettings: swiftSettings
        ),
        // The facts: certificates, handshake observations, scan results, findings and verdicts as
        // values, alerts, pins, settings and their ranges, and how the domain's documents are
        // encoded (`JSONDocumentEncoder.tlsaudit`). No rule lives here. Pure Swift.
        .target(
            name: "TLSAuditModel",
            dependencies: ["TLSAuditSupport"],
            swiftSettings: swiftSettings
        ),
        // The judges: trust, ATS policies, revocation and pin evaluation, lints, the alert detector.
        // Re-exports the model. Pure Swift: no C, no sockets, no output formats.
        .target(
            name: "TLSAuditCore",
            dependencies: ["TLSAuditSupport", "TLSAuditModel"],
            swiftSettings: swiftSettings
        ),
        // Output: the scan text renderer, text tables.
        .target(
            name: "TLSAuditOutput",
            dependencies: ["TLSAuditSupport", "TLSAuditModel"],
            swiftSettings: swiftSettings
        ),
        // The module that touches OpenSSL: sockets, handshakes, certificate parsing, chain
        // building, revocation, the HTTP client.
        .target(
            name: "TLSAuditProbe",
            dependencies: ["TLSAuditSupport", "COpenSSL", "COpenSSLProbeLibrary", "CZlib", "TLSAuditModel"],
            swiftSettings: swiftSettings
        ),
        // The loopback lab: test PKI (certificates and CRLs made with OpenSSL), in-process TLS,
        // HTTP and hostile servers, a CONNECT proxy. For the tests, the bench and `demo` only:
        // the product's scan and serve paths never import it.
        .target(
            name: "TLSAuditLab",
            dependencies: ["TLSAuditProcess", "TLSAuditSupport", "COpenSSL", "CProcess", "TLSAuditModel", "TLSAuditProbe"],
            swiftSettings: swiftSettings
        ),
        // Reads an iOS app's ATS inputs (Info.plist, .app, .ipa within size limits): the bundle
        // identifier, NSAppTransportSecurity with its plist types, the bundled certificates. No rule.
        .target(
            name: "TLSAuditApp",
            dependencies: ["CZlib", "TLSAuditModel"],
            swiftSettings: swiftSettings
        ),
        // Persistence only (the ScanStore protocols and the one store engine over SQL dialects):
        // observations, certificates by fingerprint, verdicts, current state, alerts and deliveries,
        // report runs. Knows the model, no rule, no database library.
        .target(
            name: "TLSAuditStore",
            dependencies: ["TLSAuditSupport", "TLSAuditModel"],
            swiftSettings: swiftSettings
        ),
        // The SQLite store (the embedded default) through GRDB: connections, dialect, migrations.
        .target(
            name: "TLSAuditSQLite",
            dependencies: ["TLSAuditModel", "TLSAuditStore", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        // The PostgreSQL store for fleets (libpq): the same ScanStore, the same named migrations.
        .target(
            name: "TLSAuditPostgres",
            dependencies: ["TLSAuditSupport", "CLibPQ", "TLSAuditModel", "TLSAuditStore"],
            swiftSettings: swiftSettings
        ),
        // Compliance reports: the report model, computed from the store, and its renderers
        // (text, Markdown, JSON, CSV, self-contained HTML with an SVG trend).
        .target(
            name: "TLSAuditReport",
            dependencies: ["TLSAuditSupport", "TLSAuditCore", "TLSAuditOutput", "TLSAuditStore"],
            swiftSettings: swiftSettings
        ),
        // Prometheus metrics and the HTTP listener (Hummingbird, on SwiftNIO beside the scheduler).
        .target(
            name: "TLSAuditMonitoring",
            dependencies: [
                "TLSAuditModel", "TLSAuditStore", "TLSAuditSupport", "CProcess",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird", condition: .when(traits: ["ListenerTLS"])),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["ListenerTLS"])),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The service: YAML configuration, the Dispatch scheduler, lifecycle and sd_notify.
        .target(
            name: "TLSAuditService",
            dependencies: ["TLSAuditProcess", 
                "TLSAuditCore", "TLSAuditProbe", "TLSAuditStore", "TLSAuditReport", "TLSAuditSupport", "CProcess",
                "TLSAuditMonitoring",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // The command-line front end: argument parsing and presentation only.
        .executableTarget(
            name: "tlsaudit",
            dependencies: [
                "TLSAuditCore",
                "TLSAuditApp",
                "TLSAuditOutput",
                "TLSAuditProbe",
                "TLSAuditStore",
                "TLSAuditSupport",
                "TLSAuditSQLite",
                "TLSAuditReport",
                "TLSAuditService",
                "TLSAuditPostgres",
                "TLSAuditLab", // `demo` only
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: swiftSettings
        ),
        // Builds the report tests' fixture and the report benchmark's synthetic fleet (bench/report).
        .executableTarget(
            name: "tlsaudit-bench",
            dependencies: [
                "TLSAuditCore", "TLSAuditProbe", "TLSAuditStore", "TLSAuditSQLite", "TLSAuditLab", "TLSAuditService", "TLSAuditSupport", "TLSAuditProcess",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/TLSAuditBench",
            swiftSettings: swiftSettings
        ),
        // The support module's own tests (the JSON encoder against Foundation's bytes, timestamps).
        .testTarget(
            name: "TLSAuditSupportTests",
            dependencies: ["TLSAuditProcess", "TLSAuditSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TLSAuditCoreTests",
            dependencies: ["TLSAuditCore", "TLSAuditSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TLSAuditServiceTests",
            dependencies: ["TLSAuditProcess", "TLSAuditCore", "TLSAuditOutput", "TLSAuditProbe", "TLSAuditLab", "TLSAuditStore", "TLSAuditSQLite", "TLSAuditReport", "TLSAuditService", "TLSAuditMonitoring", "TLSAuditSupport",
                           "TLSAuditPostgres", "TLSAuditServiceLab", "tlsaudit", .product(name: "GRDB", package: "GRDB.swift")],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        // The service lab: a `tlsaudit serve` process, its PKI and configuration, the built binary's
        // runner, shared by the test targets that run the binary. Test support: no product links it.
        .target(
            name: "TLSAuditServiceLab",
            dependencies: ["TLSAuditProcess", "TLSAuditLab", "TLSAuditPostgres", "TLSAuditProbe", "TLSAuditSQLite", "TLSAuditStore", "TLSAuditSupport",
                           .product(name: "GRDB", package: "GRDB.swift")],
            path: "Tests/TLSAuditServiceLab",
            swiftSettings: swiftSettings
        ),
        // The store conformance suite (what any ScanStore backend must do, against the protocol only),
        // shared by the store's and each backend's tests. Test support: no product links it.
        .target(
            name: "TLSAuditStoreConformance",
            dependencies: ["TLSAuditCore", "TLSAuditLab", "TLSAuditPostgres", "TLSAuditProbe", "TLSAuditReport", "TLSAuditService",
                           "TLSAuditSQLite", "TLSAuditStore"],
            path: "Tests/TLSAuditStoreConformance",
            swiftSettings: swiftSettings
        ),
        // The store's tests: the conformance suite over every backend, the registry, a backend defined by the test.
        .testTarget(
            name: "TLSAuditStoreTests",
            dependencies: ["TLSAuditModel", "TLSAuditProbe", "TLSAuditSQLite", "TLSAuditStore", "TLSAuditStoreConformance"],
            swiftSettings: swiftSettings
        ),
        // What only the SQLite backend has (schema snapshot, migrations, file growth, streaming).
        .testTarget(
            name: "TLSAuditSQLiteTests",
            dependencies: ["TLSAuditProcess", "TLSAuditProbe", "TLSAuditSQLite", "TLSAuditStore", "TLSAuditStoreConformance",
                           .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: swiftSettings
        ),
        // What only the PostgreSQL backend has, on a real server (round trips, migrations under a
        // lock, the same answers as SQLite, URLs, the fleet's work queue).
        .testTarget(
            name: "TLSAuditPostgresTests",
            dependencies: ["TLSAuditCore", "TLSAuditLab", "TLSAuditPostgres", "TLSAuditProbe", "TLSAuditReport", "TLSAuditService",
                           "TLSAuditSQLite", "TLSAuditStore", "TLSAuditStoreConformance"],
            swiftSettings: swiftSettings
        ),
        // The probe's own tests against loopback servers (HTTP client, path and summary caches).
        .testTarget(
            name: "TLSAuditProbeTests",
            // The probe checks end to end through the built binary: depends on it so that `swift test` builds it.
            dependencies: ["TLSAuditProcess", "TLSAuditCore", "TLSAuditLab", "TLSAuditProbe", "TLSAuditServiceLab", "TLSAuditSupport", "tlsaudit"],
            swiftSettings: swiftSettings
        ),
        // The monitoring module's own tests (per-address series, read in batches).
        .testTarget(
            name: "TLSAuditMonitoringTests",
            // The listener end to end through the built binary: depends on it so that `swift test` builds it.
            dependencies: ["TLSAuditProcess", "TLSAuditCore", "TLSAuditLab", "TLSAuditModel", "TLSAuditMonitoring", "TLSAuditStore", "TLSAuditServiceLab",
                           "TLSAuditSupport", "tlsaudit"],
            swiftSettings: swiftSettings
        ),
        // The report module's own tests: on hand-made values, and reports from a fixed database and the built binary.
        .testTarget(
            name: "TLSAuditReportTests",
            dependencies: ["TLSAuditCore", "TLSAuditLab", "TLSAuditProbe", "TLSAuditReport", "TLSAuditService", "TLSAuditServiceLab",
                           "TLSAuditSQLite", "TLSAuditStore", "TLSAuditSupport", "tlsaudit", .product(name: "GRDB", package: "GRDB.swift")],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
        // The app reader's own tests, on fixtures made by Python and the lab CA.
        .testTarget(
            name: "TLSAuditAppTests",
            dependencies: ["TLSAuditApp", "TLSAuditLab"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TLSAuditScanTests",
            // Depends on the executable so that `swift test` builds the binary the tests run.
            dependencies: ["TLSAuditProcess", "TLSAuditCore", "TLSAuditProbe", "TLSAuditLab", "TLSAuditApp", "TLSAuditOutput", "TLSAuditSupport", "tlsaudit"],
            exclude: ["Fixtures"],
            swiftSettings: swiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
