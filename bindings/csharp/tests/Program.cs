// Test program for the C# bindings: prints one PASS/FAIL line per check and exits 1 if any
// failed.  Usage: mono KolibriTests.exe [MODEL.gguf [MODEL_WITHOUT_CHAT_TEMPLATE.gguf]]
// (or KOLIBRI_TEST_MODEL / KOLIBRI_TEST_MODEL_NO_TEMPLATE).
using System;
using System.Diagnostics;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using Kolibri;

static class Program
{
    static int failures;

    static void Check(string what, bool ok, string detail = "")
    {
        Console.WriteLine("{0} - {1}{2}", ok ? "PASS" : "FAIL", what, detail == "" ? "" : ": " + detail);
        if (!ok) failures++;
    }

    /// <summary>Runs <paramref name="action"/> and checks it throws a KolibriException with
    /// <paramref name="status"/> whose message contains <paramref name="needle"/>.</summary>
    static void ExpectStatus(string what, Status status, string needle, Action action)
    {
        try
        {
            action();
            Check(what, false, "no exception");
        }
        catch (KolibriException e)
        {
            bool ok = e.Status == status && (needle == null || e.NativeMessage.Contains(needle));
            Check(what, ok, e.Status + " (" + e.NativeMessage + ")");
        }
        catch (Exception e)
        {
            Check(what, false, e.GetType().Name + ": " + e.Message);
        }
    }

    /// <summary>Greedy generation of up to n tokens on a fresh context.</summary>
    static string Generate(Model model, string prompt, bool parseSpecial, int n)
    {
        var cp = ContextParams.Default();
        cp.NCtx = 512;
        using (var ctx = new Context(model, cp))
        using (var sampler = Sampler.Greedy())
        {
            ctx.Eval(model.Tokenize(prompt, true, parseSpecial));
            var bytes = new System.Collections.Generic.List<byte>();
            for (int i = 0; i < n; i++)
            {
                int tok = sampler.Sample(ctx);
                if (model.IsEog(tok)) break;
                bytes.AddRange(model.TokenToPiece(tok, false)); // join pieces, then decode
                ctx.Eval(tok);
            }
            return Encoding.UTF8.GetString(bytes.ToArray());
        }
    }

    /// <summary>Null if the two arrays hold the same floats bit for bit, else where they differ.</summary>
    static string BitDiff(float[] got, float[] want)
    {
        if (got.Length != want.Length) return string.Format("{0} logits, want {1}", got.Length, want.Length);
        var g = new int[got.Length];
        var w = new int[want.Length];
        Buffer.BlockCopy(got, 0, g, 0, got.Length * 4);
        Buffer.BlockCopy(want, 0, w, 0, want.Length * 4);
        for (int i = 0; i < g.Length; i++)
            if (g[i] != w[i]) return string.Format("logit {0}: {1:R}, want {2:R}", i, got[i], want[i]);
        return null;
    }

    static bool SameTokens(int[] a, int[] b)
    {
        if (a.Length != b.Length) return false;
        for (int i = 0; i < a.Length; i++)
            if (a[i] != b[i]) return false;
        return true;
    }

    /// <summary>Saved state, as Go's TestSaveAndLoadState: a context loaded from another's state
    /// (bytes or file) continues bit for bit as the saving one does; a bad state is refused
    /// with BadState and changes nothing.</summary>
    static void CheckSavedState(Model model)
    {
        var cp = ContextParams.Default();
        cp.NCtx = 64;
        cp.TypeK = KvType.Q8_0;
        var dir = Path.Combine(Path.GetTempPath(), "kolibri-cs-state-" + Guid.NewGuid().ToString("N"));
        Directory.CreateDirectory(dir);
        try
        {
            using (var a = new Context(model, cp))
            {
                var toks = model.Tokenize("The capital of France is", true, false);
                a.Eval(toks);
                var savedLogits = a.GetLogits();
                var state = a.SaveState();
                var path = Path.Combine(dir, "prompt.state");
                a.SaveStateFile(path);
                var fileBytes = File.ReadAllBytes(path);
                Check("state saved to bytes and to a file", state.Length > 0 && fileBytes.Length == state.Length,
                    string.Format("{0} bytes, file {1} bytes", state.Length, fileBytes.Length));
                Check("Tokens() lists the tokens evaluated", SameTokens(a.Tokens(), toks), toks.Length + " tokens");
                a.Eval(1000);
                var want = a.GetLogits();

                var loads = new[]
                {
                    Tuple.Create("bytes", (Action<Context>)(c => c.LoadState(state))),
                    Tuple.Create("file", (Action<Context>)(c => c.LoadStateFile(path))),
                };
                foreach (var load in loads)
                {
                    using (var b = new Context(model, cp))
                    {
                        Check("a fresh context holds no tokens", b.Tokens().Length == 0);
                        load.Item2(b);
                        var held = b.Tokens();
                        Check("state loaded from " + load.Item1 + " holds the saved tokens", SameTokens(held, toks), held.Length + " tokens");
                        var diff = BitDiff(b.GetLogits(), savedLogits);
                        Check("state loaded from " + load.Item1 + " has the saved logits", diff == null, diff ?? "");
                        b.Eval(1000);
                        diff = BitDiff(b.GetLogits(), want);
                        Check("state loaded from " + load.Item1 + " continues bit for bit", diff == null, diff ?? "");
                    }
                }

                // A corrupted state is refused; the context keeps what it held.
                var bad = (byte[])state.Clone();
                bad[bad.Length / 2] ^= 1;
                ExpectStatus("a corrupted state is refused", Status.BadState, null, () => a.LoadState(bad));
                var truncated = Path.Combine(dir, "truncated.state");
                var half = new byte[fileBytes.Length / 2];
                Array.Copy(fileBytes, half, half.Length);
                File.WriteAllBytes(truncated, half);
                ExpectStatus("a truncated state file is refused", Status.BadState, null, () => a.LoadStateFile(truncated));
                ExpectStatus("a missing state file", Status.Io, null, () => a.LoadStateFile(Path.Combine(dir, "missing.state")));
                var after = a.Tokens();
                var afterDiff = BitDiff(a.GetLogits(), want);
                Check("refused loads leave the context as it was", after.Length == toks.Length + 1 && afterDiff == null,
                    string.Format("{0} tokens, want {1}{2}", after.Length, toks.Length + 1, afterDiff == null ? "" : "; " + afterDiff));
            }
        }
        finally
        {
            Directory.Delete(dir, true);
        }
    }

    /// <summary>A prompt that repeats itself: prompt lookup finds drafts in it.</summary>
    const string RepeatingPrompt = "def f1(x):\n    return x + 1\n\ndef f2(x):\n    return x + 2\n\n" +
        "def f3(x):\n    return x + 3\n\ndef f4(x):\n    return x + 4\n\ndef f5(x):\n";

    /// <summary>Plain greedy decoding (Sampler.Sample, Context.Eval) of n tokens after the
    /// prompt, stopping after an end-of-generation token (kept).</summary>
    static int[] PlainGreedy(Model model, int[] prompt, int n)
    {
        var cp = ContextParams.Default();
        cp.NCtx = 512;
        using (var ctx = new Context(model, cp))
        using (var sampler = Sampler.Greedy())
        {
            ctx.Eval(prompt);
            var outTokens = new System.Collections.Generic.List<int>();
            while (outTokens.Count < n)
            {
                int tok = sampler.Sample(ctx);
                outTokens.Add(tok);
                if (model.IsEog(tok)) break;
                ctx.Eval(tok);
            }
            return outTokens.ToArray();
        }
    }

    /// <summary>The same through a speculator on target (draft null: prompt lookup): the first
    /// token sampled, then steps until n tokens or an end-of-generation token. Checks each
    /// step's size, the target's tokens afterwards and the stats' bookkeeping; returns the
    /// tokens (cut at n or after the end-of-generation token).</summary>
    static int[] SpeculativeGreedy(string what, Context target, Context draft, SpeculatorParams? p, int[] prompt, int n,
        out SpeculatorStats stats)
    {
        var model = target.Model;
        using (var sampler = Sampler.Greedy())
        {
            target.Eval(prompt);
            int pending = sampler.Sample(target);
            using (var spec = new Speculator(target, draft, p))
            {
                var got = new System.Collections.Generic.List<int> { pending };
                int steps = 0, returned = 0, eogAt = -1;
                bool sizesOk = true;
                while (got.Count < n && eogAt < 0)
                {
                    var toks = spec.Step(sampler, pending);
                    steps++;
                    returned += toks.Length;
                    if (toks.Length < 1 || toks.Length > spec.MaxDraft + 1) { sizesOk = false; break; }
                    for (int i = 0; i < toks.Length; i++)
                        if (model.IsEog(toks[i]) && eogAt < 0) eogAt = got.Count + i;
                    got.AddRange(toks);
                    pending = toks[toks.Length - 1];
                }
                Check(what + ": each step returns 1..MaxDraft+1 tokens", sizesOk, steps + " steps");
                var want = new System.Collections.Generic.List<int>(prompt);
                want.AddRange(got.GetRange(0, got.Count - 1));
                var held = target.Tokens();
                Check(what + ": the target holds the prompt and the tokens but the pending one", SameTokens(held, want.ToArray()),
                    string.Format("{0} tokens, want {1}", held.Length, want.Count));
                ExpectStatus(what + ": no logits while a token is pending", Status.InvalidState, null, () => target.GetLogits());
                stats = spec.Stats;
                Console.WriteLine("# {0}: {1} steps, {2}", what, steps, stats);
                Check(what + ": stats count the steps and tokens",
                    stats.TargetPasses == (ulong)steps && stats.Generated == (ulong)returned
                    && stats.Accepted <= stats.Drafted && stats.Generated == stats.Accepted + stats.TargetPasses, stats.ToString());
                target.Eval(pending);
                Check(what + ": plain decoding continues after the pending token", target.GetLogits().Length == model.Dims.NVocab);
                if (eogAt >= 0) got.RemoveRange(eogAt + 1, got.Count - eogAt - 1);
                if (got.Count > n) got.RemoveRange(n, got.Count - n);
                return got.ToArray();
            }
        }
    }

    /// <summary>The model's own multi-token-prediction block, as Go's TestSpeculatorMTP:
    /// KOLIBRI_TEST_MODEL_MTP loaded with its block drafts, alone and after prompt lookup, and
    /// greedy output stays plain greedy's; without the block it is refused.</summary>
    static void CheckMtp()
    {
        var path = Environment.GetEnvironmentVariable("KOLIBRI_TEST_MODEL_MTP");
        if (string.IsNullOrEmpty(path))
        {
            Console.WriteLine("# skipped the MTP check: KOLIBRI_TEST_MODEL_MTP is not set");
            return;
        }
        using (var model = Model.Load(path, new ModelOptions { MtpBlocks = 1 }))
            OwnDrafterKeepsGreedy(model, "MTP", (ctx, p, lookup) => Speculator.WithMtp(ctx, p, lookup));
        using (var plain = Model.Load(path))
        using (var ctx = new Context(plain, ContextParams.Default()))
            ExpectStatus("the block's speculator on a model loaded without it", Status.InvalidArgument, "multi-token",
                () => Speculator.WithMtp(ctx));
    }

    /// <summary>Gemma 4's assistant, as Go's TestSpeculatorAssistant: KOLIBRI_TEST_ASSISTANT
    /// loaded for KOLIBRI_TEST_MODEL_GEMMA4 drafts, alone and after prompt lookup, and greedy
    /// output stays plain greedy's; it is refused for another model, and a model file as one.</summary>
    static void CheckAssistant(Model other)
    {
        var targetPath = Environment.GetEnvironmentVariable("KOLIBRI_TEST_MODEL_GEMMA4");
        var path = Environment.GetEnvironmentVariable("KOLIBRI_TEST_ASSISTANT");
        if (string.IsNullOrEmpty(targetPath) || string.IsNullOrEmpty(path))
        {
            Console.WriteLine("# skipped the assistant check: KOLIBRI_TEST_MODEL_GEMMA4 or KOLIBRI_TEST_ASSISTANT is not set");
            return;
        }
        using (var model = Model.Load(targetPath))
        {
            var assistant = Assistant.Load(model, path);
            OwnDrafterKeepsGreedy(model, "assistant", (ctx, p, lookup) => Speculator.WithAssistant(ctx, assistant, p, lookup));
            assistant.Dispose();
            ExpectStatus("a model file as an assistant", Status.InvalidArgument, "not an assistant",
                () => Assistant.Load(model, targetPath));
        }
        ExpectStatus("an assistant for another model", Status.InvalidArgument, "Gemma 4",
            () => Assistant.Load(other, path));
    }

    /// <summary>Speculators made by <paramref name="make"/> on <paramref name="model"/>, alone
    /// and after prompt lookup, draft and give plain greedy's tokens.</summary>
    static void OwnDrafterKeepsGreedy(Model model, string name, Func<Context, SpeculatorParams, bool, Speculator> make)
    {
        const int n = 32;
        var prompt = model.Tokenize("Once upon a time, in a small village", true, false);
        var want = PlainGreedy(model, prompt, n);
        foreach (var lookup in new[] { false, true })
        {
            var cp = ContextParams.Default();
            cp.NCtx = 256;
            var p = SpeculatorParams.Default();
            p.MaxDraft = 4;
            using (var ctx = new Context(model, cp))
            using (var sampler = Sampler.Greedy())
            using (var spec = make(ctx, p, lookup))
            {
                ctx.Eval(prompt);
                spec.Prepare();
                int pending = sampler.Sample(ctx);
                var got = new System.Collections.Generic.List<int> { pending };
                while (got.Count < n)
                {
                    var toks = spec.Step(sampler, pending);
                    got.AddRange(toks);
                    pending = toks[toks.Length - 1];
                }
                var what = lookup ? name + " after lookup" : name;
                Check(what + ": greedy tokens are plain greedy's", SameTokens(got.GetRange(0, n).ToArray(), want));
                Check(what + ": it drafted", spec.Stats.Drafted > 0, spec.Stats.ToString());
            }
        }
    }

    /// <summary>Speculative decoding, as Go's TestSpeculator*: greedy output through prompt
    /// lookup (and a draft model where KOLIBRI_TEST_MODEL_LARGE names a larger model of the
    /// same vocabulary) is plain greedy decoding's; misuse throws with a message.</summary>
    static void CheckSpeculator(Model model, string plainPath)
    {
        var dp = SpeculatorParams.Default();
        Check("speculator defaults", dp.MaxDraft == 16 && dp.DraftPMin == 0.5f && dp.LookupNgram == 4,
            string.Format("MaxDraft {0}, DraftPMin {1}, LookupNgram {2}", dp.MaxDraft, dp.DraftPMin, dp.LookupNgram));

        const int n = 32;
        var prompt = model.Tokenize(RepeatingPrompt, true, false);
        var want = PlainGreedy(model, prompt, n);
        Console.WriteLine("# plain greedy: {0}", Quote(model.Detokenize(want, false)));
        Check("plain greedy gives 32 tokens", want.Length == n, want.Length + " tokens");
        var small = SpeculatorParams.Default();
        small.MaxDraft = 4;
        small.LookupNgram = 2;
        foreach (var p in new SpeculatorParams?[] { null, small })
        {
            var what = p == null ? "lookup (defaults)" : "lookup (MaxDraft 4, LookupNgram 2)";
            var cp = ContextParams.Default();
            cp.NCtx = 512;
            using (var ctx = new Context(model, cp))
            {
                SpeculatorStats st;
                var got = SpeculativeGreedy(what, ctx, null, p, prompt, n, out st);
                Check(what + ": greedy tokens are plain greedy's", SameTokens(got, want), Quote(model.Detokenize(got, false)));
                Check(what + ": drafts were made and accepted", st.Drafted > 0 && st.Accepted > 0 && st.Accepted <= st.Drafted, st.ToString());
                Check(what + ": fewer target passes than tokens", st.TargetPasses < n, st.ToString());
            }
        }

        var largePath = Environment.GetEnvironmentVariable("KOLIBRI_TEST_MODEL_LARGE");
        if (!string.IsNullOrEmpty(largePath))
        {
            using (var large = Model.Load(largePath))
            {
                var lprompt = large.Tokenize(RepeatingPrompt, true, false);
                var lwant = PlainGreedy(large, lprompt, n);
                var cp = ContextParams.Default();
                cp.NCtx = 512;
                using (var target = new Context(large, cp))
                using (var draft = new Context(model, cp))
                {
                    ExpectStatus("a larger model cannot draft", Status.InvalidArgument, "smaller", () => new Speculator(draft, target));
                    var p = SpeculatorParams.Default();
                    p.MaxDraft = 8;
                    p.DraftPMin = 0.3f;
                    SpeculatorStats st;
                    var got = SpeculativeGreedy("draft model", target, draft, p, lprompt, n, out st);
                    Check("draft model: greedy tokens are plain greedy's", SameTokens(got, lwant), Quote(large.Detokenize(got, false)));
                    Check("draft model: drafts were made and accepted", st.Drafted > 0 && st.Accepted > 0, st.ToString());
                }
            }
        }
        else
        {
            Console.WriteLine("# skipped the draft-model check: KOLIBRI_TEST_MODEL_LARGE is not set");
        }

        // Misuse.
        var cp64 = ContextParams.Default();
        cp64.NCtx = 64;
        using (var ctx = new Context(model, cp64))
        using (var sampler = Sampler.Greedy())
        {
            foreach (var bad in new[]
            {
                Tuple.Create(0u, 0.5f, 4u, "max_draft"), Tuple.Create(33u, 0.5f, 4u, "max_draft"),
                Tuple.Create(16u, 0.5f, 0u, "lookup_ngram"), Tuple.Create(16u, 0.5f, 17u, "lookup_ngram"),
                Tuple.Create(16u, 1.5f, 4u, "draft_p_min"),
            })
            {
                var p = SpeculatorParams.Default();
                p.MaxDraft = bad.Item1;
                p.DraftPMin = bad.Item2;
                p.LookupNgram = bad.Item3;
                ExpectStatus(string.Format("speculator params MaxDraft {0}, DraftPMin {1}, LookupNgram {2} are refused", bad.Item1, bad.Item2, bad.Item3),
                    Status.InvalidArgument, bad.Item4, () => new Speculator(ctx, null, p));
            }
            ExpectStatus("zeroed SpeculatorParams are rejected", Status.InvalidArgument, null, () => new Speculator(ctx, null, new SpeculatorParams()));
            using (var same = new Context(model, cp64))
                ExpectStatus("a model cannot draft for itself", Status.InvalidArgument, "smaller", () => new Speculator(ctx, same));
            if (!string.IsNullOrEmpty(plainPath))
            {
                using (var other = Model.Load(plainPath))
                using (var octx = new Context(other, cp64))
                    ExpectStatus("a model of another vocabulary cannot draft", Status.InvalidArgument, "cannot draft", () => new Speculator(ctx, octx));
            }
            ExpectThrows<ArgumentNullException>("a null target", () => new Speculator(null));
            ExpectThrows<ArgumentException>("the target as its own draft", () => new Speculator(ctx, ctx));
            var disposed = new Context(model, cp64);
            disposed.Dispose();
            ExpectThrows<ObjectDisposedException>("a disposed target", () => new Speculator(disposed));
            ExpectThrows<ObjectDisposedException>("a disposed draft", () => new Speculator(ctx, disposed));

            var prompt2 = model.Tokenize("Hello, world", true, false);
            ctx.Eval(prompt2);
            var spec = new Speculator(ctx);
            ExpectStatus("a step after an invalid token", Status.InvalidToken, null, () => spec.Step(sampler, model.Dims.NVocab));
            ExpectStatus("a step after a negative token", Status.InvalidToken, null, () => spec.Step(sampler, -1));
            ExpectThrows<ArgumentNullException>("a step with a null sampler", () => spec.Step(null, 1));
            var disposedSampler = Sampler.Greedy();
            disposedSampler.Dispose();
            ExpectThrows<ObjectDisposedException>("a step with a disposed sampler", () => spec.Step(disposedSampler, 1));
            var st0 = spec.Stats;
            Check("failed steps change neither the stats nor the context", st0.Generated == 0 && st0.TargetPasses == 0
                && SameTokens(ctx.Tokens(), prompt2), st0.ToString());
            Check("a step after failed ones", spec.Step(sampler, 1).Length >= 1);
            spec.Dispose();
            spec.Dispose();
            ExpectThrows<ObjectDisposedException>("a step on a disposed speculator", () => spec.Step(sampler, 1));
            ExpectThrows<ObjectDisposedException>("stats of a disposed speculator", () => { var s = spec.Stats; });

            var cp8 = ContextParams.Default();
            cp8.NCtx = 8;
            using (var full = new Context(model, cp8))
            {
                full.Eval(1, 2, 3, 4, 5, 6, 7, 8);
                using (var fspec = new Speculator(full))
                {
                    ExpectStatus("a step on a full context", Status.ContextFull, null, () => fspec.Step(sampler, 9));
                    Check("a failed step leaves a full context as it was", full.TokenCount == 8);
                    full.Dispose();
                    ExpectThrows<ObjectDisposedException>("a step after the target was disposed", () => fspec.Step(sampler, 9));
                }
            }
        }
    }

    /// <summary>Checks <paramref name="action"/> throws <typeparamref name="T"/> with a message.</summary>
    static void ExpectThrows<T>(string what, Action action) where T : Exception
    {
        try
        {
            action();
            Check(what + " throws " + typeof(T).Name, false, "no exception");
        }
        catch (T e)
        {
            Check(what + " throws " + typeof(T).Name, e.Message.Length > 0, e.Message.Replace(Environment.NewLine, " ").Replace("\n", " "));
        }
        catch (Exception e)
        {
            Check(what + " throws " + typeof(T).Name, false, e.GetType().Name + ": " + e.Message);
        }
    }

    static string Quote(string s) { return "\"" + s.Replace("\\", "\\\\").Replace("\n", "\\n").Replace("\"", "\\\"") + "\""; }

    static int Main(string[] args)
    {
        string modelPath = args.Length > 0 ? args[0] : Environment.GetEnvironmentVariable("KOLIBRI_TEST_MODEL");
        string plainPath = args.Length > 1 ? args[1] : Environment.GetEnvironmentVariable("KOLIBRI_TEST_MODEL_NO_TEMPLATE");
        if (string.IsNullOrEmpty(modelPath))
        {
            Console.Error.WriteLine("usage: KolibriTests.exe MODEL.gguf [MODEL_WITHOUT_CHAT_TEMPLATE.gguf] (or set KOLIBRI_TEST_MODEL)");
            return 2;
        }
        try
        {
            Run(modelPath, plainPath);
        }
        catch (Exception e)
        {
            Check("no unexpected exception", false, e.ToString());
        }
        Console.WriteLine("{0} failure(s)", failures);
        return failures == 0 ? 0 : 1;
    }

    static void Run(string modelPath, string plainPath)
    {
        Check("library version matches the header", Library.Version == Library.HeaderVersion, Library.Version);
        Check("system info", Library.SystemInfo().Contains("arch:"));
        // Default() throws if the library's struct_size differs from the managed layout.
        var sp = SamplerParams.Default();
        ContextParams.Default();
        Check("params layouts match the library", true,
            string.Format("SamplerParams {0} bytes, ContextParams {1} bytes",
                Marshal.SizeOf(typeof(SamplerParams)), Marshal.SizeOf(typeof(ContextParams))));
        Check("sampler defaults", sp.Temperature > 0.79f && sp.Temperature < 0.81f && sp.TopK == 40, "temperature " + sp.Temperature);

        const string missing = "/nonexistent/dir/model.gguf";
        ExpectStatus("loading a missing file fails with Io naming the path", Status.Io, missing, () => Model.Load(missing));
        ExpectStatus("zeroed SamplerParams are rejected", Status.InvalidArgument, null, () => new Sampler(new SamplerParams()));

        int calls = 0;
        ExpectStatus("progress callback cancels the load", Status.Cancelled, null,
            () => Model.Load(modelPath, new ModelOptions { Progress = p => { calls++; return p < 0.5f; } }));
        Check("progress callback was called", calls > 0, calls + " call(s)");
        try
        {
            Model.Load(modelPath, new ModelOptions { Progress = p => { throw new InvalidOperationException("boom"); } });
            Check("an exception in the progress callback reaches the caller", false, "no exception");
        }
        catch (InvalidOperationException e)
        {
            Check("an exception in the progress callback reaches the caller", e.Message == "boom");
        }

        ExpectStatus("paged weights cannot be locked", Status.InvalidArgument, "mapped",
            () => Model.Load(modelPath, new ModelOptions { PagedWeights = true, UseMlock = true }));
        using (var paged = Model.Load(modelPath, new ModelOptions { PagedWeights = true }))
        {
            var text = Generate(paged, "def add(a, b):\n    return", false, 8);
            Check("paged weights generate the greedy continuation", text.Contains("a + b"), Quote(text));
        }

        var sw = Stopwatch.StartNew();
        using (var model = Model.Load(modelPath, new ModelOptions { UseMmap = true }))
        {
            Console.WriteLine("# loaded in {0} ms", sw.ElapsedMilliseconds);
            var dims = model.Dims;
            Check("architecture", model.Architecture == "qwen2", model.Architecture);
            Check("dims", dims.NVocab > 0 && dims.NLayer > 0 && dims.NParams > 0,
                string.Format("vocab {0}, layers {1}, params {2}", dims.NVocab, dims.NLayer, dims.NParams));
            Check("metadata", model.GetMeta("general.architecture") == "qwen2" && model.MetaKeys.Length > 0);
            ExpectStatus("unknown metadata key", Status.NotFound, "no.such.key", () => model.GetMeta("no.such.key"));
            Check("EOS is an end-of-generation token", model.IsEog(model.GetSpecialToken(SpecialToken.Eos)));

            const string text = "Hello, wörld! 世界 🙂";
            var toks = model.Tokenize(text, false, false);
            Check("tokenize/detokenize round trip", toks.Length > 0 && model.Detokenize(toks, false) == text, toks.Length + " tokens");
            Check("empty text has no tokens", model.Tokenize("", false, false).Length == 0);

            sw.Restart();
            const string prompt = "def add(a, b):\n    return";
            var generated = Generate(model, prompt, false, 16);
            Console.WriteLine("# {0} -> {1} ({2} ms)", Quote(prompt), Quote(generated), sw.ElapsedMilliseconds);
            Check("greedy generation continues the code", generated.Contains("a + b"));

            var messages = new[]
            {
                new ChatMessage("system", "You are a helpful assistant."),
                new ChatMessage("user", "Write a Python function that returns the sum of two numbers."),
            };
            Check("model has a chat template", model.ChatTemplate.Contains("im_start"));
            var chat = model.ApplyChatTemplate(messages, true);
            Check("chat template renders the user turn", chat.Contains("<|im_start|>user") && chat.EndsWith("<|im_start|>assistant\n"), Quote(chat));
            var reply = Generate(model, chat, true, 16);
            Console.WriteLine("# chat reply: {0}", Quote(reply));
            Check("chat reply is not empty", reply.Trim().Length > 0);
            ExpectStatus("template with a syntax error", Status.TemplateError, null,
                () => model.ApplyChatTemplate(messages, true, "{% for x in messages %}"));

            var cp = ContextParams.Default();
            cp.NCtx = 8;
            using (var ctx = new Context(model, cp))
            {
                ExpectStatus("logits before any eval", Status.InvalidState, null, () => ctx.GetLogits());
                ExpectStatus("eval an invalid token", Status.InvalidToken, null, () => ctx.Eval(1, dims.NVocab));
                ExpectStatus("eval a negative token", Status.InvalidToken, "-3", () => ctx.Eval(-3));
                ExpectStatus("eval past the context", Status.ContextFull, null, () => ctx.Eval(new int[9]));
                Check("failed evals leave the context empty", ctx.TokenCount == 0 && ctx.Capacity == 8);
                ctx.Eval(1, 2, 3, 4);
                var logits = ctx.GetLogits();
                Check("logits cover the vocabulary", logits.Length == dims.NVocab);
                ctx.Rewind(2);
                Check("rewind", ctx.TokenCount == 2);
            }

            CheckSavedState(model);
            CheckSpeculator(model, plainPath);
            CheckMtp();
            CheckAssistant(model);

            // Two contexts on one model, on two threads, give the same greedy text.
            var outs = new string[2];
            var threads = new Thread[2];
            const string goPrompt = "// A function that reverses a string in Go\nfunc reverse(s string) string {";
            for (int i = 0; i < 2; i++)
            {
                int k = i;
                threads[k] = new Thread(() => { outs[k] = Generate(model, goPrompt, false, 16); });
                threads[k].Start();
            }
            foreach (var t in threads) t.Join();
            Console.WriteLine("# both threads: {0}", Quote(outs[0] ?? "(null)"));
            Check("two threads on one model agree", outs[0] != null && outs[0] == outs[1] && outs[0].Length > 0);

            // Disposing the model first: a context made before keeps working.
            var ctx2 = new Context(model);
            model.Dispose();
            model.Dispose();
            ctx2.Eval(toks);
            Check("context outlives a disposed model", ctx2.TokenCount == toks.Length);
            ctx2.Dispose();
            ctx2.Dispose();
            try
            {
                ctx2.Eval(1);
                Check("using a disposed context throws ObjectDisposedException", false);
            }
            catch (ObjectDisposedException)
            {
                Check("using a disposed context throws ObjectDisposedException", true);
            }
        }

        if (!string.IsNullOrEmpty(plainPath))
        {
            using (var plain = Model.Load(plainPath))
            {
                ExpectStatus("model without a chat template", Status.NotFound, null, () => { var t = plain.ChatTemplate; });
                ExpectStatus("applying a missing chat template", Status.NotFound, null,
                    () => plain.ApplyChatTemplate(new[] { new ChatMessage("user", "hi") }, true));
            }
        }
    }
}
