import CKolibri

/// Gemma 4's assistant drafter (a gemma4-assistant file), loaded for one target model;
/// `Speculator(assistant:target:)` drafts with it. It keeps no KV cache: it reads the target
/// context's. Immutable, so it may be used from any number of threads at once.
public final class Assistant: @unchecked Sendable {
    let ptr: OpaquePointer

    /// Loads the assistant file at `path` for `target`, checking that it belongs to it. Throws
    /// `Status.invalidArgument` for a file that is not an assistant or one for another model.
    public init(path: String, target: Model) throws {
        try requireNoNUL(path, "path")
        var out: OpaquePointer?
        try check(kolibri_assistant_load(target.ptr, path, &out))
        ptr = out!
    }

    deinit { kolibri_assistant_free(ptr) }
}
