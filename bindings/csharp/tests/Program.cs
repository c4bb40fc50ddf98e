// Test program for the C# bindings: prints one PASS/FAIL line per check and exits 1 if any
// failed.  Usage: mono KolibriTests.exe [MODEL.gguf [MODEL_WITHOUT_CHAT_TEMPLATE.gguf]]
// (or KOLIBRI_TEST_MODEL / KOLIBRI_TEST_MODEL_NO_TEMPLATE).
using System;
using System.Diagnostics;
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
