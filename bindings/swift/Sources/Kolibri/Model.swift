import CKolibri

/// A token id of a model's vocabulary.
public typealias Token = Int32

/// One message of a conversation.
public struct ChatMessage {
    /// "system", "user", "assistant", ...
    public var role: String
    /// The message text.
    public var content: String

    /// Creates a message.
    public init(role: String, content: String) {
        self.role = role
        self.content = content
    }
}

/// A model's scalar facts.
public struct ModelDims {
    /// Number of weight elements.
    public let nParams: UInt64
    /// Context length the model was trained with.
    public let nCtxTrain: UInt32
    /// Vocabulary size; token ids are 0 ..< nVocab.
    public let nVocab: Int32
    /// Embedding width.
    public let nEmbd: UInt32
    /// Number of transformer layers.
    public let nLayer: UInt32
}

/// The special tokens a model may define.
public enum SpecialToken: Int32 {
    /// Beginning of sequence.
    case bos = 0
    /// End of sequence.
    case eos = 1
}

/// How to load a model; the defaults are the library's.
public struct ModelOptions {
    /// Worker threads of contexts that ask for 0; 0 = one per CPU core.
    public var threads: UInt32 = 0
    /// Map the file instead of reading it into private memory.
    public var useMmap = true
    /// Lock the model's memory so it is never paged out (needs RLIMIT_MEMLOCK).
    public var useMlock = false
    /// Leave the weights in the mapped file and stream them layer by layer, for a model larger
    /// than the memory available (slower; needs `useMmap` and not `useMlock`).
    public var pagedWeights = false
    /// Multi-token-prediction blocks to load: 0, or 1 for the model's first (Qwen3.5 / 3.6
    /// files carry one), which `Speculator(mtp:)` drafts with.
    public var mtpBlocks = 0
    /// Called on the loading thread with the fraction done; return false to cancel (the load
    /// then throws `Status.cancelled`).
    public var progress: ((Float) -> Bool)?

    /// The defaults.
    public init() {}
}

/// Carries the progress closure through the C callback's user_data.
private final class ProgressBox {
    let fn: (Float) -> Bool
    init(_ fn: @escaping (Float) -> Bool) { self.fn = fn }
}

/// A loaded GGUF model: weights, tokenizer and metadata. Immutable, so it may be used from
/// any number of threads at once. Freed when the last reference (including contexts) goes.
public final class Model: @unchecked Sendable {
    let ptr: OpaquePointer

    /// Loads the GGUF model at `path`.
    public init(path: String, options: ModelOptions = ModelOptions()) throws {
        try requireNoNUL(path, "path")
        var params = kolibri_model_params()
        try check(kolibri_model_params_init(&params, MemoryLayout<kolibri_model_params>.size))
        params.n_threads = options.threads
        params.use_mmap = options.useMmap
        params.use_mlock = options.useMlock
        params.paged_weights = options.pagedWeights
        params.n_mtp_blocks = options.mtpBlocks
        var box: ProgressBox?
        if let fn = options.progress {
            let b = ProgressBox(fn)
            box = b
            // A C function pointer cannot capture: the closure travels in user_data.
            params.progress_user_data = Unmanaged.passUnretained(b).toOpaque()
            params.progress_callback = { progress, userData in
                Unmanaged<ProgressBox>.fromOpaque(userData!).takeUnretainedValue().fn(progress)
            }
        }
        var out: OpaquePointer?
        let code = withExtendedLifetime(box) { kolibri_model_load(path, &params, &out) }
        try check(code)
        ptr = out!
    }

    deinit { kolibri_model_free(ptr) }

    /// The architecture name (general.architecture), e.g. "qwen2".
    public func architecture() throws -> String {
        try fillString { kolibri_model_architecture(ptr, $0, $1, $2) }
    }

    /// The model's dimensions.
    public func dims() throws -> ModelDims {
        var d = kolibri_model_dims()
        try check(kolibri_model_get_dims(ptr, &d, MemoryLayout<kolibri_model_dims>.size))
        return ModelDims(nParams: d.n_params, nCtxTrain: d.n_ctx_train, nVocab: d.n_vocab,
                         nEmbd: d.n_embd, nLayer: d.n_layer)
    }

    /// Splits text into token ids. `addSpecial` prepends BOS when the model wants one;
    /// `parseSpecial` turns texts such as "<|im_start|>" into their special ids.
    public func tokenize(_ text: String, addSpecial: Bool, parseSpecial: Bool) throws -> [Token] {
        let bytes = Array(text.utf8) // passed with its length: no NUL needed
        return try bytes.withUnsafeBufferPointer { raw -> [Token] in
            let chars = raw.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            var n = 0
            var code = kolibri_tokenize(ptr, chars, bytes.count, addSpecial, parseSpecial, nil, 0, &n)
            var attempts = 0
            while code == Status.bufferTooSmall.rawValue && attempts < 4 {
                var tokens = [Token](repeating: 0, count: n)
                code = tokens.withUnsafeMutableBufferPointer {
                    kolibri_tokenize(ptr, chars, bytes.count, addSpecial, parseSpecial, $0.baseAddress, $0.count, &n)
                }
                if code == Status.ok.rawValue { return Array(tokens[..<n]) }
                attempts += 1
            }
            try check(code)
            return [] // the (NULL, 0) query succeeds when there are no tokens
        }
    }

    /// The bytes one token contributes to text. A piece may be part of a multi-byte UTF-8
    /// character: join pieces before decoding. With `special` false, control tokens give none.
    public func tokenToPiece(_ token: Token, special: Bool = false) throws -> [UInt8] {
        try fillBytes { kolibri_token_to_piece(ptr, token, special, $0, $1, $2) }
    }

    /// Turns token ids back into text (invalid UTF-8 becomes U+FFFD). With `special` false,
    /// control tokens are left out.
    public func detokenize(_ tokens: [Token], special: Bool = false) throws -> String {
        try tokens.withUnsafeBufferPointer { t in
            try fillString { kolibri_detokenize(ptr, t.baseAddress, t.count, special, $0, $1, $2) }
        }
    }

    /// Whether `token` ends a generation (EOS, end of turn, ...).
    public func isEOG(_ token: Token) throws -> Bool {
        var eog = false
        try check(kolibri_model_token_is_eog(ptr, token, &eog))
        return eog
    }

    /// The id of a special token; throws `Status.notFound` if the model has none.
    public func specialToken(_ kind: SpecialToken) throws -> Token {
        var token: Token = 0
        try check(kolibri_model_special_token(ptr, kind.rawValue, &token))
        return token
    }

    /// A metadata value as text; throws `Status.notFound` for an unknown key.
    public func meta(_ key: String) throws -> String {
        try requireNoNUL(key, "key")
        return try fillString { kolibri_model_meta_string(ptr, key, $0, $1, $2) }
    }

    /// Every metadata key, in file order.
    public func metaKeys() throws -> [String] {
        var count = 0
        try check(kolibri_model_meta_count(ptr, &count))
        return try (0..<count).map { i in try fillString { kolibri_model_meta_key(ptr, i, $0, $1, $2) } }
    }

    /// The model's Jinja chat template; throws `Status.notFound` if it has none.
    public func chatTemplate() throws -> String {
        try fillString { kolibri_model_chat_template(ptr, $0, $1, $2) }
    }

    /// Renders `messages` through the model's chat template, or through `template` if given.
    /// With `addGenerationPrompt` the text ends where the reply begins. Tokenize the result
    /// with `parseSpecial: true`.
    public func applyChatTemplate(_ messages: [ChatMessage], addGenerationPrompt: Bool,
                                  template: String? = nil) throws -> String {
        for m in messages {
            try requireNoNUL(m.role, "role")
            try requireNoNUL(m.content, "content")
        }
        if let t = template { try requireNoNUL(t, "template") }
        // The C array points at C strings that must outlive the call: allocate and free them.
        let strings = messages.flatMap { [cStringCopy($0.role), cStringCopy($0.content)] }
        defer { strings.forEach { $0.deallocate() } }
        let native = (0..<messages.count).map {
            kolibri_chat_message(role: UnsafePointer(strings[2 * $0]), content: UnsafePointer(strings[2 * $0 + 1]))
        }
        return try native.withUnsafeBufferPointer { msgs in
            try fillString { buf, cap, len in
                if let t = template {
                    return kolibri_chat_apply_template(ptr, t, msgs.baseAddress, msgs.count, addGenerationPrompt, buf, cap, len)
                }
                return kolibri_chat_apply_template(ptr, nil, msgs.baseAddress, msgs.count, addGenerationPrompt, buf, cap, len)
            }
        }
    }
}

/// A NUL-terminated UTF-8 copy of `s`; release it with `deallocate()`.
private func cStringCopy(_ s: String) -> UnsafeMutablePointer<CChar> {
    let utf8 = s.utf8CString
    let p = UnsafeMutablePointer<CChar>.allocate(capacity: utf8.count)
    utf8.withUnsafeBufferPointer { p.initialize(from: $0.baseAddress!, count: $0.count) }
    return p
}
