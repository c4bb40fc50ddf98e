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
}
