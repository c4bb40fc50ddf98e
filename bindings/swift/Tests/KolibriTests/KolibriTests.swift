import Foundation
import XCTest
@testable import Kolibri

/// Needs KOLIBRI_TEST_MODEL (Qwen2.5-Coder-0.5B-Instruct GGUF); skipped otherwise.
final class KolibriTests: XCTestCase {
    func model() throws -> Model {
        guard let path = ProcessInfo.processInfo.environment["KOLIBRI_TEST_MODEL"] else {
            throw XCTSkip("KOLIBRI_TEST_MODEL is not set")
        }
        return try Model(path: path)
    }

    func generate(_ model: Model, _ prompt: String, parseSpecial: Bool = false, n: Int = 16) throws -> String {
        let ctx = try Context(model: model, options: ContextOptions(nCtx: 512))
        let sampler = try Sampler(params: .greedy)
        try ctx.eval(try model.tokenize(prompt, addSpecial: true, parseSpecial: parseSpecial))
        var bytes: [UInt8] = []
        for _ in 0..<n {
            let token = try sampler.sample(ctx)
            if try model.isEOG(token) { break }
            bytes += try model.tokenToPiece(token)
            try ctx.eval([token])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    func testMissingFile() {
        let path = "/nonexistent/dir/model.gguf"
        XCTAssertThrowsError(try Model(path: path)) { error in
            let e = error as? KolibriError
            XCTAssertEqual(e?.status, .io)
            XCTAssertTrue(e?.message.contains(path) ?? false)
        }
    }

    func testGreedy() throws {
        let m = try model()
        let text = try generate(m, "def add(a, b):\n    return")
        XCTAssertTrue(text.contains("a + b"), text)
    }

    func testPagedWeights() throws {
        _ = try model()
        let path = ProcessInfo.processInfo.environment["KOLIBRI_TEST_MODEL"]!
        var options = ModelOptions()
        options.pagedWeights = true
        options.useMlock = true
        XCTAssertThrowsError(try Model(path: path, options: options)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidArgument)
        }
        options.useMlock = false
        let text = try generate(try Model(path: path, options: options), "def add(a, b):\n    return")
        XCTAssertTrue(text.contains("a + b"), text)
    }

    func testChatTemplate() throws {
        let m = try model()
        let prompt = try m.applyChatTemplate([ChatMessage(role: "user", content: "Hi")], addGenerationPrompt: true)
        XCTAssertTrue(prompt.contains("<|im_start|>user"), prompt)
    }

    func testInvalidToken() throws {
        let m = try model()
        let ctx = try Context(model: m, options: ContextOptions(nCtx: 8))
        XCTAssertThrowsError(try ctx.eval([1, try m.dims().nVocab])) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidToken)
        }
    }

    /// Where two logit arrays differ bit for bit, or nil if they do not.
    func bitDiff(_ got: [Float], _ want: [Float]) -> String? {
        if got.count != want.count { return "\(got.count) logits, want \(want.count)" }
        guard let i = (0..<got.count).first(where: { got[$0].bitPattern != want[$0].bitPattern }) else { return nil }
        return "logit \(i): \(got[i]), want \(want[i])"
    }

    /// As Go's TestSaveAndLoadState: a context loaded from another's state (bytes or file)
    /// continues bit for bit as the saving one does; a bad state is refused with `badState`
    /// and changes nothing.
    func testSaveAndLoadState() throws {
        let m = try model()
        let options = ContextOptions(nCtx: 64, typeK: .q8_0)
        let a = try Context(model: m, options: options)
        let toks = try m.tokenize("The capital of France is", addSpecial: true, parseSpecial: false)
        try a.eval(toks)
        let savedLogits = try a.logits()
        let state = try a.saveState()
        XCTAssertFalse(state.isEmpty)
        XCTAssertEqual(try a.tokens(), toks)

        let dir = FileManager.default.temporaryDirectory
            .appendingPathComponent("kolibri-swift-state-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("prompt.state").path
        try a.saveStateFile(path)
        try a.eval([1000])
        let want = try a.logits()

        let loads: [(String, (Context) throws -> Void)] = [
            ("bytes", { try $0.loadState(state) }),
            ("file", { try $0.loadStateFile(path) }),
        ]
        for (how, load) in loads {
            let b = try Context(model: m, options: options)
            XCTAssertEqual(try b.tokens(), [])
            try load(b)
            XCTAssertEqual(try b.tokens(), toks, "loaded from \(how)")
            XCTAssertNil(bitDiff(try b.logits(), savedLogits), "saved logits, loaded from \(how)")
            try b.eval([1000])
            XCTAssertNil(bitDiff(try b.logits(), want), "continuing, loaded from \(how)")
        }

        // A corrupted state is refused; the context keeps what it held.
        var bad = state
        bad[bad.count / 2] ^= 1
        XCTAssertThrowsError(try a.loadState(bad)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .badState)
        }
        XCTAssertThrowsError(try a.loadState(Array(state[..<(state.count / 2)]))) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .badState)
        }
        XCTAssertThrowsError(try a.loadStateFile(dir.appendingPathComponent("missing.state").path)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .io)
        }
        XCTAssertEqual(try a.tokens().count, toks.count + 1)
        XCTAssertNil(bitDiff(try a.logits(), want))
    }

    /// As Go's TestSpeculatorLookupGreedy: greedy decoding through prompt lookup gives exactly
    /// plain greedy decoding's tokens, and lookup drafts on a prompt that repeats itself.
    func testSpeculatorLookup() throws {
        let m = try model()
        let prompt = try m.tokenize(
            "def f1(x):\n    return x + 1\n\ndef f2(x):\n    return x + 2\n\n"
                + "def f3(x):\n    return x + 3\n\ndef f4(x):\n    return x + 4\n\ndef f5(x):\n",
            addSpecial: true, parseSpecial: false)
        let n = 32

        let plain = try Context(model: m, options: ContextOptions(nCtx: 512))
        let plainSampler = try Sampler(params: .greedy)
        try plain.eval(prompt)
        var want: [Token] = []
        while want.count < n {
            let token = try plainSampler.sample(plain)
            want.append(token)
            if try m.isEOG(token) { break }
            try plain.eval([token])
        }

        let ctx = try Context(model: m, options: ContextOptions(nCtx: 512))
        let sampler = try Sampler(params: .greedy)
        try ctx.eval(prompt)
        var pending = try sampler.sample(ctx)
        let spec = try Speculator(target: ctx)
        var got = [pending]
        var steps = 0
        while got.count < n {
            let tokens = try spec.step(sampler, pending: pending)
            steps += 1
            XCTAssertTrue((1...spec.maxDraft + 1).contains(tokens.count), "\(tokens.count) tokens")
            got += tokens
            pending = tokens.last!
            if try tokens.contains(where: { try m.isEOG($0) }) { break }
        }
        XCTAssertEqual(try ctx.tokens(), prompt + Array(got.dropLast()))
        XCTAssertEqual(Array(got.prefix(n)), want)
        let stats = try spec.stats()
        XCTAssertEqual(stats.targetPasses, UInt64(steps))
        XCTAssertGreaterThan(stats.drafted, 0)
        XCTAssertLessThanOrEqual(stats.accepted, stats.drafted)
        XCTAssertThrowsError(try ctx.logits()) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidState)
        }
    }

    /// The model's own multi-token-prediction block (KOLIBRI_TEST_MODEL_MTP, a Qwen3.5 file
    /// with one): greedy output stays plain greedy's, alone and after prompt lookup; without
    /// the block the speculator is refused.
    func testSpeculatorMTP() throws {
        guard let path = ProcessInfo.processInfo.environment["KOLIBRI_TEST_MODEL_MTP"] else {
            throw XCTSkip("KOLIBRI_TEST_MODEL_MTP is not set")
        }
        var options = ModelOptions()
        options.mtpBlocks = 1
        let m = try Model(path: path, options: options)
        try ownDrafterKeepsGreedy(m) { ctx, params, lookup in
            try Speculator(mtp: ctx, params: params, lookup: lookup)
        }
        let withoutBlock = try Context(model: try Model(path: path), options: ContextOptions(nCtx: 64))
        XCTAssertThrowsError(try Speculator(mtp: withoutBlock)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidArgument)
        }
    }

    /// Gemma 4's assistant (KOLIBRI_TEST_ASSISTANT, for the KOLIBRI_TEST_MODEL_GEMMA4 file):
    /// greedy output stays plain greedy's, alone and after prompt lookup; a model file is
    /// refused as an assistant.
    func testSpeculatorAssistant() throws {
        let env = ProcessInfo.processInfo.environment
        guard let targetPath = env["KOLIBRI_TEST_MODEL_GEMMA4"], let path = env["KOLIBRI_TEST_ASSISTANT"] else {
            throw XCTSkip("KOLIBRI_TEST_MODEL_GEMMA4 or KOLIBRI_TEST_ASSISTANT is not set")
        }
        let m = try Model(path: targetPath)
        let assistant = try Assistant(path: path, target: m)
        try ownDrafterKeepsGreedy(m) { ctx, params, lookup in
            try Speculator(assistant: assistant, target: ctx, params: params, lookup: lookup)
        }
        XCTAssertThrowsError(try Assistant(path: targetPath, target: m)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidArgument)
        }
    }

    /// Speculators made by `make` on `m`, alone and after prompt lookup, draft and give plain
    /// greedy's tokens.
    private func ownDrafterKeepsGreedy(
        _ m: Model, _ make: (Context, SpeculatorParams, Bool) throws -> Speculator
    ) throws {
        let prompt = try m.tokenize("Once upon a time, in a small village", addSpecial: true, parseSpecial: false)
        let n = 32
        let plain = try Context(model: m, options: ContextOptions(nCtx: 256))
        let plainSampler = try Sampler(params: .greedy)
        try plain.eval(prompt)
        var want: [Token] = []
        while want.count < n {
            let token = try plainSampler.sample(plain)
            want.append(token)
            try plain.eval([token])
        }
        for lookup in [false, true] {
            let ctx = try Context(model: m, options: ContextOptions(nCtx: 256))
            let sampler = try Sampler(params: .greedy)
            var params = SpeculatorParams()
            params.maxDraft = 4
            let spec = try make(ctx, params, lookup)
            try ctx.eval(prompt)
            try spec.prepare()
            var pending = try sampler.sample(ctx)
            var got = [pending]
            while got.count < n {
                let tokens = try spec.step(sampler, pending: pending)
                got += tokens
                pending = tokens.last!
            }
            XCTAssertEqual(Array(got.prefix(n)), want, "lookup \(lookup)")
            XCTAssertGreaterThan(try spec.stats().drafted, 0)
        }
    }

    func testSpeculatorErrors() throws {
        let m = try model()
        let ctx = try Context(model: m, options: ContextOptions(nCtx: 64))
        for (maxDraft, lookupNgram) in [(UInt32(0), UInt32(4)), (33, 4), (16, 0), (16, 17)] {
            var p = SpeculatorParams()
            p.maxDraft = maxDraft
            p.lookupNgram = lookupNgram
            XCTAssertThrowsError(try Speculator(target: ctx, params: p)) { error in
                let e = error as? KolibriError
                XCTAssertEqual(e?.status, .invalidArgument)
                XCTAssertFalse(e?.message.isEmpty ?? true)
            }
        }
        // The same model cannot draft for itself: a draft must be smaller.
        let same = try Context(model: m, options: ContextOptions(nCtx: 64))
        XCTAssertThrowsError(try Speculator(target: ctx, draft: same)) { error in
            let e = error as? KolibriError
            XCTAssertEqual(e?.status, .invalidArgument)
            XCTAssertTrue(e?.message.contains("smaller") ?? false, e?.message ?? "")
        }
        XCTAssertThrowsError(try Speculator(target: ctx, draft: ctx))
        try ctx.eval(try m.tokenize("Hello", addSpecial: true, parseSpecial: false))
        let spec = try Speculator(target: ctx)
        let sampler = try Sampler(params: .greedy)
        XCTAssertThrowsError(try spec.step(sampler, pending: try m.dims().nVocab)) { error in
            XCTAssertEqual((error as? KolibriError)?.status, .invalidToken)
        }
        XCTAssertEqual(try spec.stats(), SpeculatorStats(drafted: 0, accepted: 0, targetPasses: 0, generated: 0))
    }
}
