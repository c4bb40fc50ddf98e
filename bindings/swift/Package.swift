// swift-tools-version:5.5
// Swift bindings for Kolibri's C API. The C library is found with pkg-config ("kolibri").
import PackageDescription

let package = Package(
    name: "Kolibri",
    products: [
        .library(name: "Kolibri", targets: ["Kolibri"]),
    ],
    targets: [
        // The C API as a Clang module; the flags come from kolibri.pc.
        .systemLibrary(name: "CKolibri", pkgConfig: "kolibri"),
        .target(name: "Kolibri", dependencies: ["CKolibri"]),
        .testTarget(name: "KolibriTests", dependencies: ["Kolibri"]),
    ]
)
