using System;
using System.Collections.Generic;
using System.Runtime.ExceptionServices;
using System.Runtime.InteropServices;

namespace Kolibri
{
    /// <summary>How to load a model. The defaults are the library's.</summary>
    public sealed class ModelOptions
    {
        /// <summary>Worker threads of contexts that ask for 0; 0 = one per CPU core.</summary>
        public uint Threads { get; set; }
        /// <summary>Map the file instead of reading it into private memory (default true).</summary>
        public bool UseMmap { get; set; } = true;
        /// <summary>Lock the model's memory so it is never paged out (needs RLIMIT_MEMLOCK).</summary>
        public bool UseMlock { get; set; }
        /// <summary>Leave the weights in the mapped file and stream them layer by layer, for a
        /// model larger than the memory available (slower; needs UseMmap, not UseMlock).</summary>
        public bool PagedWeights { get; set; }
        /// <summary>Multi-token-prediction blocks to load: 0, or 1 for the model's first
        /// (Qwen3.5 / 3.6 files carry one), which <see cref="Speculator.WithMtp"/> drafts with.</summary>
        public uint MtpBlocks { get; set; }
        /// <summary>Called on the loading thread with the fraction done; return false to
        /// cancel (Load then throws with <see cref="Status.Cancelled"/>).</summary>
        public Func<float, bool> Progress { get; set; }
    }

    /// <summary>One message of a conversation.</summary>
    public struct ChatMessage
    {
        /// <summary>"system", "user", "assistant", ...</summary>
        public string Role;
        /// <summary>The message text.</summary>
        public string Content;

        /// <summary>Creates a message.</summary>
        public ChatMessage(string role, string content) { Role = role; Content = content; }
    }

    /// <summary>
    /// A loaded GGUF model: weights, tokenizer, metadata. Immutable; safe to use from many
    /// threads at once. Dispose it to release its memory (contexts keep the weights alive).
    /// </summary>
    public sealed class Model : IDisposable
    {
        /// <summary>The native handle (for advanced interop).</summary>
        public ModelHandle Handle { get; private set; }

        Model(ModelHandle handle) { Handle = handle; }

        // The progress state reaches the static callback through a GCHandle: a static
        // delegate needs no per-load lifetime management and also works under AOT.
        sealed class ProgressState
        {
            public Func<float, bool> Fn;
            public ExceptionDispatchInfo Error;
        }

        static readonly NativeProgressCallback ProgressTrampoline = OnProgress;
        static readonly IntPtr ProgressTrampolinePtr = Marshal.GetFunctionPointerForDelegate(ProgressTrampoline);

        static bool OnProgress(float progress, IntPtr userData)
        {
            var state = (ProgressState)GCHandle.FromIntPtr(userData).Target;
            try
            {
                return state.Fn(progress);
            }
            catch (Exception e)
            {
                // An exception must not unwind through native frames: cancel, rethrow later.
                state.Error = ExceptionDispatchInfo.Capture(e);
                return false;
            }
        }

        /// <summary>Loads the GGUF model at <paramref name="path"/>.</summary>
        /// <exception cref="KolibriException">Io, InvalidModel, Unsupported, Cancelled, ...</exception>
        public static Model Load(string path, ModelOptions options = null)
        {
            var cpath = Native.ToUtf8Z(path, "path");
            var p = new ModelParams();
            Native.Check(Native.kolibri_model_params_init(ref p, (UIntPtr)Marshal.SizeOf(typeof(ModelParams))));
            Native.CheckLayout(p.StructSize, typeof(ModelParams));
            ProgressState state = null;
            var gch = default(GCHandle);
            if (options != null)
            {
                p.Threads = options.Threads;
                p.UseMmap = options.UseMmap;
                p.UseMlock = options.UseMlock;
                p.PagedWeights = options.PagedWeights;
                p.NMtpBlocks = new UIntPtr(options.MtpBlocks);
                if (options.Progress != null)
                {
                    state = new ProgressState { Fn = options.Progress };
                    gch = GCHandle.Alloc(state);
                    p.ProgressCallback = ProgressTrampolinePtr;
                    p.ProgressUserData = GCHandle.ToIntPtr(gch);
                }
            }
            try
            {
                ModelHandle handle;
                var st = Native.kolibri_model_load(cpath, ref p, out handle);
                if (state != null && state.Error != null)
                {
                    handle.Dispose();
                    state.Error.Throw();
                }
                Native.Check(st);
                return new Model(handle);
            }
            finally
            {
                if (gch.IsAllocated) gch.Free();
            }
        }

        /// <summary>Frees the model; contexts created from it stay usable. Idempotent.</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>The architecture name (general.architecture), e.g. "qwen2".</summary>
        public string Architecture
        {
            get { return Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_model_architecture(Handle, b, c, out n)); }
        }

        /// <summary>The model's dimensions.</summary>
        public ModelDims Dims
        {
            get
            {
                ModelDims d;
                Native.Check(Native.kolibri_model_get_dims(Handle, out d, new UIntPtr((uint)Marshal.SizeOf(typeof(ModelDims)))));
                return d;
            }
        }

        /// <summary>Splits text into token ids. <paramref name="addSpecial"/> prepends BOS when the
        /// model wants one; <paramref name="parseSpecial"/> turns texts such as "&lt;|im_start|&gt;"
        /// into their special ids.</summary>
        public int[] Tokenize(string text, bool addSpecial, bool parseSpecial)
        {
            if (text == null) throw new ArgumentNullException("text");
            var bytes = System.Text.Encoding.UTF8.GetBytes(text); // passed with its length: no NUL
            var len = new UIntPtr((uint)bytes.Length);
            UIntPtr n;
            var st = Native.kolibri_tokenize(Handle, bytes, len, addSpecial, parseSpecial, null, UIntPtr.Zero, out n);
            for (int attempt = 0; st == Status.BufferTooSmall && attempt < 4; attempt++)
            {
                var tokens = new int[(int)n.ToUInt64()];
                st = Native.kolibri_tokenize(Handle, bytes, len, addSpecial, parseSpecial, tokens, new UIntPtr((uint)tokens.Length), out n);
                if (st == Status.Ok)
                {
                    Array.Resize(ref tokens, (int)n.ToUInt64());
                    return tokens;
                }
            }
            Native.Check(st);
            return new int[0]; // the (NULL, 0) query succeeds when there are no tokens
        }

        /// <summary>The bytes one token contributes to text. A piece may be part of a multi-byte
        /// UTF-8 character: join pieces before decoding. With <paramref name="special"/> false,
        /// control tokens give no bytes.</summary>
        public byte[] TokenToPiece(int token, bool special)
        {
            return Native.GetBytes((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_token_to_piece(Handle, token, special, b, c, out n));
        }

        /// <summary>Turns token ids back into text (invalid UTF-8 becomes U+FFFD). With
        /// <paramref name="special"/> false, control tokens are left out.</summary>
        public string Detokenize(int[] tokens, bool special)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            var count = new UIntPtr((uint)tokens.Length);
            return Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_detokenize(Handle, tokens, count, special, b, c, out n));
        }

        /// <summary>Whether <paramref name="token"/> ends a generation (EOS, end of turn, ...).</summary>
        public bool IsEog(int token)
        {
            bool eog;
            Native.Check(Native.kolibri_model_token_is_eog(Handle, token, out eog));
            return eog;
        }

        /// <summary>The id of a special token; throws NotFound if the model has none.</summary>
        public int GetSpecialToken(SpecialToken kind)
        {
            int token;
            Native.Check(Native.kolibri_model_special_token(Handle, (int)kind, out token));
            return token;
        }

        /// <summary>A metadata value as text; throws NotFound for an unknown key.</summary>
        public string GetMeta(string key)
        {
            var ckey = Native.ToUtf8Z(key, "key");
            return Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_model_meta_string(Handle, ckey, b, c, out n));
        }

        /// <summary>Every metadata key, in file order.</summary>
        public string[] MetaKeys
        {
            get
            {
                UIntPtr count;
                Native.Check(Native.kolibri_model_meta_count(Handle, out count));
                var keys = new string[(int)count.ToUInt64()];
                for (int i = 0; i < keys.Length; i++)
                {
                    var index = new UIntPtr((uint)i);
                    keys[i] = Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_model_meta_key(Handle, index, b, c, out n));
                }
                return keys;
            }
        }

        /// <summary>The model's Jinja chat template; throws NotFound if it has none.</summary>
        public string ChatTemplate
        {
            get { return Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) => Native.kolibri_model_chat_template(Handle, b, c, out n)); }
        }

        /// <summary>Renders <paramref name="messages"/> through the model's chat template, or
        /// through <paramref name="templateSource"/> if given. With
        /// <paramref name="addGenerationPrompt"/> the text ends where the reply begins.
        /// Tokenize the result with parseSpecial true.</summary>
        public string ApplyChatTemplate(IList<ChatMessage> messages, bool addGenerationPrompt, string templateSource = null)
        {
            if (messages == null) throw new ArgumentNullException("messages");
            var src = templateSource == null ? null : Native.ToUtf8Z(templateSource, "templateSource");
            // The strings live in unmanaged memory: the array holds pointers to them.
            var native = new NativeChatMessage[messages.Count];
            try
            {
                for (int i = 0; i < native.Length; i++)
                {
                    native[i].Role = AllocUtf8(messages[i].Role, "Role");
                    native[i].Content = AllocUtf8(messages[i].Content, "Content");
                }
                var count = new UIntPtr((uint)native.Length);
                return Native.GetString((byte[] b, UIntPtr c, out UIntPtr n) =>
                    Native.kolibri_chat_apply_template(Handle, src, native, count, addGenerationPrompt, b, c, out n));
            }
            finally
            {
                foreach (var m in native)
                {
                    if (m.Role != IntPtr.Zero) Marshal.FreeHGlobal(m.Role);
                    if (m.Content != IntPtr.Zero) Marshal.FreeHGlobal(m.Content);
                }
            }
        }

        static IntPtr AllocUtf8(string s, string what)
        {
            var bytes = Native.ToUtf8Z(s, what);
            var p = Marshal.AllocHGlobal(bytes.Length);
            Marshal.Copy(bytes, 0, p, bytes.Length);
            return p;
        }
    }
}
