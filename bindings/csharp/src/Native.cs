// P/Invoke declarations for kolibri.h. Everything here mirrors the header exactly; the public
// classes in the other files are the API.
using System;
using System.Runtime.InteropServices;

namespace Kolibri
{
    /// <summary>Result of a Kolibri call (kolibri_status). The numbers are fixed by the C API.</summary>
    public enum Status : int
    {
        /// <summary>Success.</summary>
        Ok = 0,
        /// <summary>A NULL pointer, an out-of-range value, text that is not UTF-8, or a bad struct_size.</summary>
        InvalidArgument = 1,
        /// <summary>The output buffer is too small (handled inside the binding).</summary>
        BufferTooSmall = 2,
        /// <summary>The model file could not be opened, read, mapped or locked.</summary>
        Io = 3,
        /// <summary>The file is not a valid GGUF model.</summary>
        InvalidModel = 4,
        /// <summary>An architecture or tensor type Kolibri does not implement.</summary>
        Unsupported = 5,
        /// <summary>A token id outside [0, n_vocab).</summary>
        InvalidToken = 6,
        /// <summary>The context cannot hold the tokens given.</summary>
        ContextFull = 7,
        /// <summary>A progress or abort callback asked to stop.</summary>
        Cancelled = 8,
        /// <summary>The metadata key, special token or chat template does not exist.</summary>
        NotFound = 9,
        /// <summary>The chat template does not parse or failed to render.</summary>
        TemplateError = 10,
        /// <summary>Not valid now: no logits yet, or the handle is in use on another thread.</summary>
        InvalidState = 11,
        /// <summary>An allocation failed.</summary>
        OutOfMemory = 12,
        /// <summary>An internal error (a bug in Kolibri).</summary>
        Internal = 13,
        /// <summary>An internal panic was caught; the handle involved is disabled.</summary>
        Panic = 14,
        /// <summary>Saved state that does not fit this context: truncated, corrupted, another
        /// model's or KV cache type's, or another format version. The context is unchanged.</summary>
        BadState = 15,
    }

    /// <summary>The special tokens a model may define (kolibri_special_token).</summary>
    public enum SpecialToken : int
    {
        /// <summary>Beginning of sequence.</summary>
        Bos = 0,
        /// <summary>End of sequence.</summary>
        Eos = 1,
    }

    /// <summary>How a KV cache stores keys or values (KOLIBRI_KV_TYPE_*).</summary>
    public enum KvType : int
    {
        /// <summary>16-bit floats (the default).</summary>
        F16 = 0,
        /// <summary>Q8_0 blocks: about half of f16's memory.</summary>
        Q8_0 = 1,
        /// <summary>Q4_0 blocks.</summary>
        Q4_0 = 2,
    }

    /// <summary>How to create a context (kolibri_context_params). Start from <see cref="Default"/>.</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ContextParams
    {
        internal UIntPtr StructSize;
        /// <summary>Positions the context holds; 0 = 4096, or the trained context if smaller.</summary>
        public uint NCtx;
        /// <summary>Worker threads; 0 = the model's thread setting.</summary>
        public uint Threads;
        /// <summary>Most tokens per forward pass; 0 = 512.</summary>
        public uint Batch;
        /// <summary>How the KV cache stores keys (f16 by default).</summary>
        public KvType TypeK;
        /// <summary>How the KV cache stores values (f16 by default).</summary>
        public KvType TypeV;

        /// <summary>The library's defaults (kolibri_context_params_init).</summary>
        public static ContextParams Default()
        {
            var p = new ContextParams();
            Native.Check(Native.kolibri_context_params_init(ref p, (UIntPtr)Marshal.SizeOf(typeof(ContextParams))));
            Native.CheckLayout(p.StructSize, typeof(ContextParams));
            return p;
        }
    }

    /// <summary>
    /// How to sample (kolibri_sampler_params). Start from <see cref="Default"/>: the library's
    /// defaults are not all zero.
    /// </summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct SamplerParams
    {
        internal UIntPtr StructSize;
        /// <summary>Softmax temperature; &lt;= 0 means greedy.</summary>
        public float Temperature;
        /// <summary>Keep the k most likely tokens; 0 = off.</summary>
        public int TopK;
        /// <summary>Nucleus sampling threshold; 1 = off.</summary>
        public float TopP;
        /// <summary>Drop tokens less likely than MinP times the best one; 0 = off.</summary>
        public float MinP;
        /// <summary>Repetition penalty on recent tokens; 1 = off.</summary>
        public float RepeatPenalty;
        /// <summary>Frequency penalty (count x value); 0 = off.</summary>
        public float FrequencyPenalty;
        /// <summary>Presence penalty (once per token seen); 0 = off.</summary>
        public float PresencePenalty;
        /// <summary>Recent tokens the penalties see; 0 disables them.</summary>
        public int PenaltyLastN;
        /// <summary>Random seed.</summary>
        public ulong Seed;

        /// <summary>The library's defaults (kolibri_sampler_params_init).</summary>
        public static SamplerParams Default()
        {
            var p = new SamplerParams();
            Native.Check(Native.kolibri_sampler_params_init(ref p, (UIntPtr)Marshal.SizeOf(typeof(SamplerParams))));
            Native.CheckLayout(p.StructSize, typeof(SamplerParams));
            return p;
        }
    }

    /// <summary>
    /// How to speculate (kolibri_speculator_params). Start from <see cref="Default"/>: the
    /// library's defaults are not all zero, and zero MaxDraft or LookupNgram is refused.
    /// </summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct SpeculatorParams
    {
        internal UIntPtr StructSize;
        /// <summary>Most tokens drafted per step, 1..32 (fewer when they do not pay). Default 16.</summary>
        public uint MaxDraft;
        /// <summary>A draft model's draft ends at a token it gives less probability than this, 0..1. Default 0.5.</summary>
        public float DraftPMin;
        /// <summary>Prompt lookup matches the last 1..LookupNgram tokens, 1..16. Default 4.</summary>
        public uint LookupNgram;

        /// <summary>The library's defaults (kolibri_speculator_params_init).</summary>
        public static SpeculatorParams Default()
        {
            var p = new SpeculatorParams();
            Native.Check(Native.kolibri_speculator_params_init(ref p, (UIntPtr)Marshal.SizeOf(typeof(SpeculatorParams))));
            Native.CheckLayout(p.StructSize, typeof(SpeculatorParams));
            return p;
        }
    }

    /// <summary>What speculation achieved so far (kolibri_speculator_stats).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct SpeculatorStats
    {
        /// <summary>Tokens drafted and checked by the target.</summary>
        public ulong Drafted;
        /// <summary>Of those, the ones the target agreed with.</summary>
        public ulong Accepted;
        /// <summary>Target forward passes (one per step).</summary>
        public ulong TargetPasses;
        /// <summary>Tokens returned by the steps.</summary>
        public ulong Generated;

        /// <summary>"drafted D, accepted A, target passes P, generated G".</summary>
        public override string ToString()
        {
            return string.Format("drafted {0}, accepted {1}, target passes {2}, generated {3}", Drafted, Accepted, TargetPasses, Generated);
        }
    }

    /// <summary>A model's scalar facts (kolibri_model_dims).</summary>
    [StructLayout(LayoutKind.Sequential)]
    public struct ModelDims
    {
        /// <summary>Number of weight elements.</summary>
        public ulong NParams;
        /// <summary>Context length the model was trained with.</summary>
        public uint NCtxTrain;
        /// <summary>Vocabulary size; token ids are 0 .. NVocab-1.</summary>
        public int NVocab;
        /// <summary>Embedding width.</summary>
        public uint NEmbd;
        /// <summary>Number of transformer layers.</summary>
        public uint NLayer;
    }

    /// <summary>kolibri_model_params; internal because the callback fields are managed by Model.Load.
    /// The struct's fourth version (repack_cache_dir, paged_weights and n_mtp_blocks appended).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct ModelParams
    {
        public UIntPtr StructSize;
        public uint Threads;
        [MarshalAs(UnmanagedType.I1)] public bool UseMmap;   // C bool is one byte
        [MarshalAs(UnmanagedType.I1)] public bool UseMlock;
        public IntPtr ProgressCallback;
        public IntPtr ProgressUserData;
        public IntPtr RepackCacheDir;   // NULL: no repack cache
        [MarshalAs(UnmanagedType.I1)] public bool PagedWeights;
        public UIntPtr NMtpBlocks;      // size_t
    }

    /// <summary>kolibri_chat_message: two NUL-terminated UTF-8 strings in unmanaged memory.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct NativeChatMessage
    {
        public IntPtr Role;
        public IntPtr Content;
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    [return: MarshalAs(UnmanagedType.I1)]
    internal delegate bool NativeProgressCallback(float progress, IntPtr userData);

    /// <summary>A (buf, capacity, *len) call.</summary>
    internal delegate Status FillFunc(byte[] buf, UIntPtr capacity, out UIntPtr len);

    internal static class Native
    {
        const string Lib = "kolibri";

        [DllImport(Lib)] internal static extern IntPtr kolibri_version();
        [DllImport(Lib)] internal static extern uint kolibri_version_number();
        [DllImport(Lib)] internal static extern IntPtr kolibri_last_error();
        [DllImport(Lib)] internal static extern IntPtr kolibri_status_string(int status);
        [DllImport(Lib)] internal static extern Status kolibri_system_info([Out] byte[] buf, UIntPtr capacity, out UIntPtr len);

        [DllImport(Lib)] internal static extern Status kolibri_model_params_init(ref ModelParams p, UIntPtr structSize);
        [DllImport(Lib)] internal static extern Status kolibri_context_params_init(ref ContextParams p, UIntPtr structSize);
        [DllImport(Lib)] internal static extern Status kolibri_sampler_params_init(ref SamplerParams p, UIntPtr structSize);
        [DllImport(Lib)] internal static extern Status kolibri_speculator_params_init(ref SpeculatorParams p, UIntPtr structSize);

        [DllImport(Lib)] internal static extern Status kolibri_model_load(byte[] path, ref ModelParams p, out ModelHandle model);
        [DllImport(Lib)] internal static extern void kolibri_model_free(IntPtr model);
        [DllImport(Lib)] internal static extern Status kolibri_model_architecture(ModelHandle m, [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib)] internal static extern Status kolibri_model_get_dims(ModelHandle m, out ModelDims dims, UIntPtr size);
        [DllImport(Lib)] internal static extern Status kolibri_model_special_token(ModelHandle m, int kind, out int token);
        [DllImport(Lib)] internal static extern Status kolibri_model_token_is_eog(ModelHandle m, int token, [MarshalAs(UnmanagedType.I1)] out bool eog);
        [DllImport(Lib)] internal static extern Status kolibri_model_meta_string(ModelHandle m, byte[] key, [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib)] internal static extern Status kolibri_model_meta_count(ModelHandle m, out UIntPtr count);
        [DllImport(Lib)] internal static extern Status kolibri_model_meta_key(ModelHandle m, UIntPtr index, [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib)] internal static extern Status kolibri_model_chat_template(ModelHandle m, [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib)]
        internal static extern Status kolibri_chat_apply_template(ModelHandle m, byte[] templateSource, NativeChatMessage[] messages,
            UIntPtr nMessages, [MarshalAs(UnmanagedType.I1)] bool addGenerationPrompt, [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);

        [DllImport(Lib)]
        internal static extern Status kolibri_tokenize(ModelHandle m, byte[] text, UIntPtr textLen, [MarshalAs(UnmanagedType.I1)] bool addSpecial,
            [MarshalAs(UnmanagedType.I1)] bool parseSpecial, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);
        [DllImport(Lib)]
        internal static extern Status kolibri_token_to_piece(ModelHandle m, int token, [MarshalAs(UnmanagedType.I1)] bool special,
            [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);
        [DllImport(Lib)]
        internal static extern Status kolibri_detokenize(ModelHandle m, int[] tokens, UIntPtr nTokens, [MarshalAs(UnmanagedType.I1)] bool special,
            [Out] byte[] buf, UIntPtr capacity, out UIntPtr len);

        [DllImport(Lib)] internal static extern Status kolibri_context_new(ModelHandle m, ref ContextParams p, out ContextHandle ctx);
        [DllImport(Lib)] internal static extern void kolibri_context_free(IntPtr ctx);
        [DllImport(Lib)] internal static extern Status kolibri_context_eval(ContextHandle ctx, int[] tokens, UIntPtr nTokens);
        [DllImport(Lib)] internal static extern Status kolibri_context_logits(ContextHandle ctx, out IntPtr logits, out UIntPtr nVocab);
        [DllImport(Lib)] internal static extern Status kolibri_context_rewind(ContextHandle ctx, UIntPtr nKeep);
        [DllImport(Lib)] internal static extern Status kolibri_context_size(ContextHandle ctx, out UIntPtr nTokens, out UIntPtr nCtx);
        [DllImport(Lib)] internal static extern Status kolibri_context_tokens(ContextHandle ctx, [Out] int[] buf, UIntPtr capacity, out UIntPtr count);
        [DllImport(Lib)] internal static extern Status kolibri_context_state_size(ContextHandle ctx, out UIntPtr size);
        [DllImport(Lib)] internal static extern Status kolibri_context_state_save(ContextHandle ctx, [Out] byte[] buf, UIntPtr capacity, out UIntPtr size);
        [DllImport(Lib)] internal static extern Status kolibri_context_state_load(ContextHandle ctx, byte[] buf, UIntPtr size);
        [DllImport(Lib)] internal static extern Status kolibri_context_state_save_file(ContextHandle ctx, byte[] path);
        [DllImport(Lib)] internal static extern Status kolibri_context_state_load_file(ContextHandle ctx, byte[] path);

        [DllImport(Lib)] internal static extern Status kolibri_sampler_new(ref SamplerParams p, out SamplerHandle sampler);
        [DllImport(Lib)] internal static extern void kolibri_sampler_free(IntPtr sampler);
        [DllImport(Lib)] internal static extern Status kolibri_sampler_sample(SamplerHandle s, ContextHandle ctx, out int token);
        [DllImport(Lib)] internal static extern Status kolibri_sampler_accept(SamplerHandle s, int token);
        [DllImport(Lib)] internal static extern Status kolibri_sampler_reset(SamplerHandle s);

        // A SafeHandle argument cannot be null: the draft context is a ContextHandle, or
        // IntPtr.Zero (NULL, prompt lookup) through the *_lookup entry points.
        [DllImport(Lib)]
        internal static extern Status kolibri_speculator_new(ContextHandle target, ContextHandle draft, ref SpeculatorParams p,
            out SpeculatorHandle speculator);
        [DllImport(Lib, EntryPoint = "kolibri_speculator_new")]
        internal static extern Status kolibri_speculator_new_lookup(ContextHandle target, IntPtr draft, ref SpeculatorParams p,
            out SpeculatorHandle speculator);
        [DllImport(Lib)]
        internal static extern Status kolibri_speculator_new_mtp(ContextHandle target, ref SpeculatorParams p,
            [MarshalAs(UnmanagedType.I1)] bool lookup, out SpeculatorHandle speculator);
        [DllImport(Lib)]
        internal static extern Status kolibri_speculator_new_assistant(ContextHandle target, AssistantHandle assistant,
            ref SpeculatorParams p, [MarshalAs(UnmanagedType.I1)] bool lookup, out SpeculatorHandle speculator);
        [DllImport(Lib)]
        internal static extern Status kolibri_assistant_load(ModelHandle target, byte[] path, out AssistantHandle assistant);
        [DllImport(Lib)] internal static extern void kolibri_assistant_free(IntPtr assistant);
        [DllImport(Lib)]
        internal static extern Status kolibri_speculator_prepare(SpeculatorHandle s, ContextHandle target, ContextHandle draft);
        [DllImport(Lib, EntryPoint = "kolibri_speculator_prepare")]
        internal static extern Status kolibri_speculator_prepare_nodraft(SpeculatorHandle s, ContextHandle target, IntPtr draft);
        [DllImport(Lib)] internal static extern void kolibri_speculator_free(IntPtr speculator);
        [DllImport(Lib)]
        internal static extern Status kolibri_speculator_step(SpeculatorHandle s, ContextHandle target, ContextHandle draft,
            SamplerHandle sampler, int pending, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);
        [DllImport(Lib, EntryPoint = "kolibri_speculator_step")]
        internal static extern Status kolibri_speculator_step_lookup(SpeculatorHandle s, ContextHandle target, IntPtr draft,
            SamplerHandle sampler, int pending, [Out] int[] tokens, UIntPtr capacity, out UIntPtr nTokens);
        [DllImport(Lib)] internal static extern Status kolibri_speculator_get_stats(SpeculatorHandle s, out SpeculatorStats stats);

        /// <summary>Throws for a failed status. Call it right after the P/Invoke, on the same
        /// thread: kolibri_last_error is thread-local and overwritten by the next failure.</summary>
        internal static void Check(Status status)
        {
            if (status != Status.Ok)
                throw new KolibriException(status, FromUtf8Z(kolibri_last_error()));
        }

        /// <summary>Fails loudly if the library's struct_size differs from the managed layout,
        /// i.e. these bindings mirror another version of kolibri.h than the library's.</summary>
        internal static void CheckLayout(UIntPtr structSize, Type type)
        {
            if (structSize.ToUInt64() != (ulong)Marshal.SizeOf(type))
                throw new InvalidOperationException(string.Format(
                    "{0}: the library's struct_size is {1}, these bindings' is {2} (header/library version mismatch)",
                    type.Name, structSize, Marshal.SizeOf(type)));
        }

        /// <summary>Decodes a NUL-terminated UTF-8 string owned by the library.</summary>
        internal static string FromUtf8Z(IntPtr p)
        {
            if (p == IntPtr.Zero) return "";
            int n = 0;
            while (Marshal.ReadByte(p, n) != 0) n++;
            var bytes = new byte[n];
            Marshal.Copy(p, bytes, 0, n);
            return System.Text.Encoding.UTF8.GetString(bytes);
        }

        /// <summary>UTF-8 bytes plus a NUL, for const char* parameters. A string with a NUL
        /// inside is refused: C would silently cut it short.</summary>
        internal static byte[] ToUtf8Z(string s, string what)
        {
            if (s == null) throw new ArgumentNullException(what);
            if (s.IndexOf('\0') >= 0) throw new ArgumentException(what + " contains a NUL character", what);
            var n = System.Text.Encoding.UTF8.GetByteCount(s);
            var bytes = new byte[n + 1];
            System.Text.Encoding.UTF8.GetBytes(s, 0, s.Length, bytes, 0);
            return bytes;
        }

        /// <summary>The (buf, capacity, *len) convention: ask with (NULL, 0), then fill
        /// len + 1 bytes (text plus NUL). Returns the bytes without the NUL.</summary>
        internal static byte[] GetBytes(FillFunc fill)
        {
            UIntPtr len;
            var st = fill(null, UIntPtr.Zero, out len);
            for (int attempt = 0; st == Status.BufferTooSmall && attempt < 4; attempt++)
            {
                var buf = new byte[checked((int)len.ToUInt64() + 1)];
                st = fill(buf, new UIntPtr((ulong)buf.Length), out len);
                if (st == Status.Ok)
                {
                    Array.Resize(ref buf, (int)len.ToUInt64());
                    return buf;
                }
            }
            Check(st);
            return new byte[0]; // Ok on the size query: nothing to write
        }

        /// <summary><see cref="GetBytes"/> decoded as UTF-8.</summary>
        internal static string GetString(FillFunc fill)
        {
            return System.Text.Encoding.UTF8.GetString(GetBytes(fill));
        }
    }
}
