import CKolibri

/// How to sample. `SamplerParams()` holds the library's defaults (not all zero).
public struct SamplerParams {
    /// Softmax temperature; <= 0 means greedy.
    public var temperature: Float
    /// Keep the k most likely tokens; 0 = off.
    public var topK: Int32
    /// Nucleus threshold; 1 = off.
    public var topP: Float
    /// Drop tokens less likely than minP times the best one; 0 = off.
    public var minP: Float
    /// Repetition penalty on recent tokens; 1 = off.
    public var repeatPenalty: Float
    /// Frequency penalty (count x value); 0 = off.
    public var frequencyPenalty: Float
    /// Presence penalty (once per token seen); 0 = off.
    public var presencePenalty: Float
    /// Recent tokens the penalties see; 0 disables them.
    public var penaltyLastN: Int32
    /// Random seed.
    public var seed: UInt64

    /// The library's defaults (kolibri_sampler_params_init).
    public init() {
        var p = kolibri_sampler_params()
        kolibri_sampler_params_init(&p, MemoryLayout<kolibri_sampler_params>.size) // cannot fail with a non-NULL pointer
        temperature = p.temperature
        topK = p.top_k
        topP = p.top_p
        minP = p.min_p
        repeatPenalty = p.repeat_penalty
        frequencyPenalty = p.frequency_penalty
        presencePenalty = p.presence_penalty
        penaltyLastN = p.penalty_last_n
        seed = p.seed
    }

    /// Greedy decoding: always the highest logit.
    public static var greedy: SamplerParams {
        var p = SamplerParams()
        p.temperature = 0
        return p
    }
}

/// Picks tokens from a context's logits. Use from one thread at a time.
public final class Sampler {
    let ptr: OpaquePointer

    /// Creates a sampler.
    public init(params: SamplerParams = SamplerParams()) throws {
        var p = kolibri_sampler_params()
        try check(kolibri_sampler_params_init(&p, MemoryLayout<kolibri_sampler_params>.size))
        p.temperature = params.temperature
        p.top_k = params.topK
        p.top_p = params.topP
        p.min_p = params.minP
        p.repeat_penalty = params.repeatPenalty
        p.frequency_penalty = params.frequencyPenalty
        p.presence_penalty = params.presencePenalty
        p.penalty_last_n = params.penaltyLastN
        p.seed = params.seed
        var out: OpaquePointer?
        try check(kolibri_sampler_new(&p, &out))
        ptr = out!
    }

    deinit { kolibri_sampler_free(ptr) }

    /// Picks the next token from `context`'s last logits and accepts it; feed it back with
    /// `Context.eval`.
    public func sample(_ context: Context) throws -> Token {
        var token: Token = 0
        try check(kolibri_sampler_sample(ptr, context.ptr, &token))
        return token
    }

    /// Records a token for the penalties without sampling it.
    public func accept(_ token: Token) throws {
        try check(kolibri_sampler_accept(ptr, token))
    }

    /// Forgets accepted tokens and restarts the random generator from the seed.
    public func reset() throws {
        try check(kolibri_sampler_reset(ptr))
    }
}
