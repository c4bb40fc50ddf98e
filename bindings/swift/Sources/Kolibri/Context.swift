import CKolibri

/// How to create a context; 0 means the library's default for each field.
public struct ContextOptions {
    /// Positions the context holds; 0 = 4096, or the trained context if smaller.
    public var nCtx: UInt32 = 0
    /// Worker threads; 0 = the model's thread setting.
    public var threads: UInt32 = 0
    /// Most tokens per forward pass; 0 = 512.
    public var batch: UInt32 = 0

    /// Options with the given values (all default to 0).
    public init(nCtx: UInt32 = 0, threads: UInt32 = 0, batch: UInt32 = 0) {
        self.nCtx = nCtx
        self.threads = threads
        self.batch = batch
    }
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
}
