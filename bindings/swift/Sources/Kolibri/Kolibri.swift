import CKolibri

// kolibri.h defines kolibri_status as int32_t with KOLIBRI_STATUS_* constants; Swift sees
// the functions return Int32, wrapped here in a struct with named values.

/// A kolibri_status code. The numbers are fixed by the C API; unknown future codes keep
/// their raw value.
public struct Status: RawRepresentable, Hashable, CustomStringConvertible {
    /// The C status code.
    public let rawValue: Int32
    /// Wraps a C status code.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Success.
    public static let ok = Status(rawValue: 0)
    /// A NULL pointer, out-of-range value, non-UTF-8 text or bad struct_size.
    public static let invalidArgument = Status(rawValue: 1)
    /// An output buffer was too small (handled inside the bindings).
    public static let bufferTooSmall = Status(rawValue: 2)
    /// The model file could not be opened, read, mapped or locked.
    public static let io = Status(rawValue: 3)
    /// The file is not a valid GGUF model.
    public static let invalidModel = Status(rawValue: 4)
    /// An architecture or tensor type Kolibri does not implement.
    public static let unsupported = Status(rawValue: 5)
    /// A token id outside 0 ..< nVocab.
    public static let invalidToken = Status(rawValue: 6)
    /// The context cannot hold the tokens given.
    public static let contextFull = Status(rawValue: 7)
    /// A progress or abort callback asked to stop.
    public static let cancelled = Status(rawValue: 8)
    /// The metadata key, special token or chat template does not exist.
    public static let notFound = Status(rawValue: 9)
    /// The chat template does not parse or failed to render.
    public static let templateError = Status(rawValue: 10)
    /// Not valid now: no logits yet, or the handle is in use on another thread.
    public static let invalidState = Status(rawValue: 11)
    /// An allocation failed.
    public static let outOfMemory = Status(rawValue: 12)
    /// An internal error (a bug in Kolibri).
    public static let `internal` = Status(rawValue: 13)
    /// An internal panic was caught; the handle involved is disabled.
    public static let panic = Status(rawValue: 14)
    /// Saved state that does not fit this context: truncated, corrupted, another model's or KV
    /// cache type's, or another format version. The context is unchanged.
    public static let badState = Status(rawValue: 15)

    /// The library's English name for the status ("invalid argument", ...).
    public var description: String { String(cString: kolibri_status_string(rawValue)) }
}

/// A failed Kolibri call: its status and the library's message (kolibri_last_error).
public struct KolibriError: Error, CustomStringConvertible {
    /// The status the call returned.
    public let status: Status
    /// The library's description of the failure.
    public let message: String

    /// "kolibri: <status>: <message>".
    public var description: String { "kolibri: \(status): \(message)" }
}

/// Throws for a failed status. Called right after the C call, on the same thread (Swift code
/// here never suspends in between): kolibri_last_error is thread-local.
@inline(__always)
func check(_ code: Int32) throws {
    if code != Status.ok.rawValue {
        throw KolibriError(status: Status(rawValue: code), message: String(cString: kolibri_last_error()))
    }
}

/// The (buf, capacity, *len) convention: ask with (NULL, 0), then fill len + 1 bytes (the text
/// plus its NUL). Returns the bytes without the NUL.
func fillBytes(_ call: (UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>) -> Int32) throws -> [UInt8] {
    var len = 0
    var code = call(nil, 0, &len)
    var attempts = 0
    while code == Status.bufferTooSmall.rawValue && attempts < 4 {
        var buf = [CChar](repeating: 0, count: len + 1)
        code = buf.withUnsafeMutableBufferPointer { call($0.baseAddress, $0.count, &len) }
        if code == Status.ok.rawValue {
            return buf[..<len].map { UInt8(bitPattern: $0) }
        }
        attempts += 1
    }
    try check(code)
    return [] // the size query succeeded: nothing to write
}

/// `fillBytes` decoded as UTF-8 (the library only returns valid UTF-8 text).
func fillString(_ call: (UnsafeMutablePointer<CChar>?, Int, UnsafeMutablePointer<Int>) -> Int32) throws -> String {
    String(decoding: try fillBytes(call), as: UTF8.self)
}

/// Refuses strings C would silently cut short at an embedded NUL.
func requireNoNUL(_ s: String, _ what: String) throws {
    if s.utf8.contains(0) {
        throw KolibriError(status: .invalidArgument, message: "\(what) contains a NUL byte")
    }
}

/// Facts about the loaded native library.
public enum Library {
    /// The library's version, "MAJOR.MINOR.PATCH".
    public static var version: String { String(cString: kolibri_version()) }

    /// The library's version as MAJOR * 1000000 + MINOR * 1000 + PATCH.
    public static var versionNumber: UInt32 { kolibri_version_number() }

    /// The machine as Kolibri sees it: CPU features and the kernels chosen.
    public static func systemInfo() throws -> String {
        try fillString { kolibri_system_info($0, $1, $2) }
    }
}
