import CKolibri

/// How to create a context; 0 means the library's default for each field.
public struct ContextOptions {
    /// Positions the context holds; 0 = 4096, or the trained context if smaller.
    public var nCtx: UInt32 = 0
    /// Worker threads; 0 = the model's thread setting.
    public var threads: UInt32 = 0
    /// Most tokens per forward pass; 0 = 512.
    public var batch: UInt32 = 0
    /// How the KV cache stores keys and values.
    public var typeK: KVType = .f16
    public var typeV: KVType = .f16

    /// Options with the given values (all default to 0, and f16 caches).
    public init(
        nCtx: UInt32 = 0, threads: UInt32 = 0, batch: UInt32 = 0,
        typeK: KVType = .f16, typeV: KVType = .f16
    ) {
        self.nCtx = nCtx
        self.threads = threads
        self.batch = batch
        self.typeK = typeK
        self.typeV = typeV
    }
}

/// How a context's KV cache stores keys or values (KOLIBRI_KV_TYPE_*).
public enum KVType: Int32 {
    /// 16-bit floats (the default).
    case f16 = 0
    /// Q8_0 blocks: about half of f16's memory.
    case q8_0 = 1
    /// Q4_0 blocks.
    case q4_0 = 2
}

/// A sequence being evaluated: KV cache and the last logits. Use from one thread at a time;
/// contexts on the same model run concurrently.
public final class Context {
    let ptr: OpaquePointer
    /// The model this context evaluates. The strong reference frees the context before its
    /// model (child before parent), though the library would also accept the other order.
    public let model: Model

    /// Creates an empty context on `model`.
    public init(model: Model, options: ContextOptions = ContextOptions()) throws {
        var params = kolibri_context_params()
        try check(kolibri_context_params_init(&params, MemoryLayout<kolibri_context_params>.size))
        params.n_ctx = options.nCtx
        params.n_threads = options.threads
        params.n_batch = options.batch
        params.type_k = options.typeK.rawValue
        params.type_v = options.typeV.rawValue
        var out: OpaquePointer?
        try check(kolibri_context_new(model.ptr, &params, &out))
        ptr = out!
        self.model = model
    }

    deinit { kolibri_context_free(ptr) }

    /// Evaluates tokens at the next positions and keeps the last one's logits. On failure
    /// (`invalidToken`, `contextFull`, ...) the context is unchanged.
    public func eval(_ tokens: [Token]) throws {
        try tokens.withUnsafeBufferPointer { try check(kolibri_context_eval(ptr, $0.baseAddress, $0.count)) }
    }

    /// A copy of the last evaluated position's logits, one per vocabulary entry. Throws
    /// `invalidState` before the first eval or after a rewind.
    public func logits() throws -> [Float] {
        var data: UnsafePointer<Float>?
        var n = 0
        try check(kolibri_context_logits(ptr, &data, &n))
        // The C array lives until the next eval, rewind or free: copy it now.
        return Array(UnsafeBufferPointer(start: data, count: n))
    }

    /// Keeps the first `nKeep` tokens and forgets the rest.
    public func rewind(to nKeep: Int) throws {
        try check(kolibri_context_rewind(ptr, nKeep))
    }

    /// The number of tokens held and the most the context can hold.
    public func size() throws -> (tokens: Int, capacity: Int) {
        var held = 0, capacity = 0
        try check(kolibri_context_size(ptr, &held, &capacity))
        return (held, capacity)
    }

    /// The tokens the context holds, in position order (after `loadState`: the saved ones).
    public func tokens() throws -> [Token] {
        var n = 0
        try check(kolibri_context_size(ptr, &n, nil))
        var tokens = [Token](repeating: 0, count: n + 1) // one spare: never an empty buffer
        try tokens.withUnsafeMutableBufferPointer {
            try check(kolibri_context_tokens(ptr, $0.baseAddress, $0.count, &n))
        }
        return Array(tokens[..<n])
    }

    /// The context's state: its tokens, KV cache and last logits. The bytes name the model and
    /// the format version and carry a checksum; `loadState` on a context of the same model and
    /// KV cache types continues exactly where this one is.
    public func saveState() throws -> [UInt8] {
        var size = 0
        try check(kolibri_context_state_size(ptr, &size))
        var state = [UInt8](repeating: 0, count: size)
        var written = 0
        try state.withUnsafeMutableBufferPointer {
            try check(kolibri_context_state_save(ptr, $0.baseAddress, $0.count, &written))
        }
        if written < state.count { state.removeLast(state.count - written) }
        return state
    }

    /// Replaces the context's contents (tokens, KV cache, logits) with a state from
    /// `saveState`. A state that does not fit (truncated, corrupted, another model's or KV
    /// cache type's) throws `Status.badState` and leaves the context as it was.
    public func loadState(_ state: [UInt8]) throws {
        try state.withUnsafeBufferPointer {
            try check(kolibri_context_state_load(ptr, $0.baseAddress, $0.count))
        }
    }

    /// Writes `saveState`'s bytes to the file at `path` (beside it, then renamed into place:
    /// whole or not at all). Throws `Status.io` if the file cannot be written.
    public func saveStateFile(_ path: String) throws {
        try requireNoNUL(path, "path")
        try check(kolibri_context_state_save_file(ptr, path))
    }

    /// `loadState` from a file written by `saveStateFile`. Throws `Status.io` if the file
    /// cannot be read, `Status.badState` as `loadState` does (the context is then unchanged).
    public func loadStateFile(_ path: String) throws {
        try requireNoNUL(path, "path")
        try check(kolibri_context_state_load_file(ptr, path))
    }
}
