import CKolibri

/// How to speculate (kolibri_speculator_params). `SpeculatorParams()` holds the library's
/// defaults: maxDraft 16, draftPMin 0.5, lookupNgram 4.
public struct SpeculatorParams {
    /// Most tokens drafted per step, 1...32 (fewer are drafted when they do not pay).
    public var maxDraft: UInt32
    /// A draft model's draft ends at a token it gives less probability than this, 0...1.
    public var draftPMin: Float
    /// Prompt lookup matches the last 1...lookupNgram tokens, 1...16.
    public var lookupNgram: UInt32

    /// These params as the C API takes them.
    func native() throws -> kolibri_speculator_params {
        var p = kolibri_speculator_params()
        try check(kolibri_speculator_params_init(&p, MemoryLayout<kolibri_speculator_params>.size))
        p.max_draft = maxDraft
        p.draft_p_min = draftPMin
        p.lookup_ngram = lookupNgram
        return p
    }

    /// The library's defaults (kolibri_speculator_params_init).
    public init() {
        var p = kolibri_speculator_params()
        kolibri_speculator_params_init(&p, MemoryLayout<kolibri_speculator_params>.size) // cannot fail with a non-NULL pointer
        maxDraft = p.max_draft
        draftPMin = p.draft_p_min
        lookupNgram = p.lookup_ngram
    }
}

/// What speculation achieved so far (kolibri_speculator_stats).
public struct SpeculatorStats: Equatable {
    /// Tokens drafted and checked by the target.
    public var drafted: UInt64
    /// Of those, the ones the target agreed with.
    public var accepted: UInt64
    /// Target forward passes (one per step).
    public var targetPasses: UInt64
    /// Tokens returned by the steps.
    public var generated: UInt64
}

/// Speculative decoding on a target context: each `step` drafts a few tokens, checks them all
/// in one pass of the target and returns the tokens the target agrees with plus the one it
/// chose next. Greedy output is exactly plain decoding's; sampled output keeps the target's
/// distribution.
///
/// Drafts come from a draft context (a smaller model with the target's vocabulary), from the
/// target model's own multi-token-prediction block (`init(mtp:)`) or its assistant
/// (`init(assistant:target:)`), or from prompt lookup (the
/// last tokens matched against the sequence so far). The speculator holds strong references
/// to its contexts and passes them to every step, so it
/// is freed before them. Use a speculator, its contexts and the sampler from one thread at a
/// time (`Status.invalidState` otherwise).
public final class Speculator {
    let ptr: OpaquePointer
    /// The context the speculator decodes on.
    public let target: Context
    /// The draft context, or nil (prompt lookup, the model's own drafter).
    public let draft: Context?
    /// Most tokens drafted per step: a step returns at most `maxDraft + 1` tokens.
    public let maxDraft: Int

    /// Creates a speculator for `target`'s sequence. `draft` is nil for prompt lookup;
    /// otherwise its model must share the target's vocabulary token by token and be smaller,
    /// and it must hold as many positions as the target. Throws `Status.invalidArgument` for a
    /// draft that does not fit or a parameter out of range.
    public init(target: Context, draft: Context? = nil, params: SpeculatorParams = SpeculatorParams()) throws {
        if let draft = draft, draft === target {
            throw KolibriError(status: .invalidArgument, message: "the draft context is the target context")
        }
        var p = try params.native()
        var out: OpaquePointer?
        try check(kolibri_speculator_new(target.ptr, draft?.ptr, &p, &out)) // NULL draft: prompt lookup
        ptr = out!
        self.target = target
        self.draft = draft
        maxDraft = Int(p.max_draft)
    }

    /// Creates a speculator for `target`'s sequence that drafts with the target model's own
    /// multi-token-prediction block (a model loaded with `ModelOptions.mtpBlocks` 1) and, with
    /// `lookup`, by prompt lookup first. From now on the target keeps the hidden states the
    /// block reads: call `prepare()` after each `eval` of the prompt. Throws
    /// `Status.invalidArgument` for a model loaded without its block.
    public init(mtp target: Context, params: SpeculatorParams = SpeculatorParams(), lookup: Bool = false) throws {
        var p = try params.native()
        var out: OpaquePointer?
        try check(kolibri_speculator_new_mtp(target.ptr, &p, lookup, &out))
        ptr = out!
        self.target = target
        self.draft = nil
        maxDraft = Int(p.max_draft)
    }

    /// Creates a speculator for `target`'s sequence that drafts with `assistant` (loaded for
    /// the target's model) and, with `lookup`, by prompt lookup first. From now on the target
    /// keeps the hidden states the assistant reads: call `prepare()` after each `eval` of the
    /// prompt. Throws `Status.invalidArgument` for an assistant loaded for another model.
    public init(assistant: Assistant, target: Context, params: SpeculatorParams = SpeculatorParams(),
                lookup: Bool = false) throws {
        var p = try params.native()
        var out: OpaquePointer?
        try check(kolibri_speculator_new_assistant(target.ptr, assistant.ptr, &p, lookup, &out))
        ptr = out!
        self.target = target
        self.draft = nil
        maxDraft = Int(p.max_draft)
    }

    deinit { kolibri_speculator_free(ptr) }

    /// Brings the drafter up to what the target holds: a draft context reads the prompt now
    /// (as prompt processing) rather than in the first step; the model's own block reads what
    /// the target's last evaluation evaluated. Prompt lookup has nothing to do.
    public func prepare() throws {
        try check(kolibri_speculator_prepare(ptr, target.ptr, draft?.ptr))
    }

    /// One speculative step after `pending`, the token last sampled (by `Sampler.sample` or an
    /// earlier step) and not yet evaluated. Returns the tokens generated: at least one, at most
    /// `maxDraft + 1`. The last is the new pending token; the others are in the target context
    /// now, and the sampler has accepted all of them. A step stops after an end-of-generation
    /// token. Afterwards the target has no logits: step again, or `eval` the pending token.
    /// On error (`contextFull`: no room for the pending token, `invalidToken`, `cancelled`,
    /// ...) the contexts and the sampler are as before.
    public func step(_ sampler: Sampler, pending: Token) throws -> [Token] {
        var tokens = [Token](repeating: 0, count: maxDraft + 1)
        var n = 0
        try tokens.withUnsafeMutableBufferPointer {
            try check(kolibri_speculator_step(ptr, target.ptr, draft?.ptr, sampler.ptr, pending,
                                              $0.baseAddress, $0.count, &n))
        }
        return Array(tokens[..<n])
    }

    /// What the speculator achieved so far.
    public func stats() throws -> SpeculatorStats {
        var s = kolibri_speculator_stats()
        try check(kolibri_speculator_get_stats(ptr, &s))
        return SpeculatorStats(drafted: s.drafted, accepted: s.accepted,
                               targetPasses: s.target_passes, generated: s.generated)
    }
}
