using System;
using System.Runtime.InteropServices;

namespace Kolibri
{
    /// <summary>
    /// A sequence being evaluated: KV cache and the last logits. Use from one thread at a time;
    /// contexts on the same model run concurrently.
    /// </summary>
    public sealed class Context : IDisposable
    {
        /// <summary>The native handle (for advanced interop).</summary>
        public ContextHandle Handle { get; private set; }

        /// <summary>The model this context evaluates. Held so the model outlives its contexts
        /// on the managed side too (the library also keeps the weights alive itself).</summary>
        public Model Model { get; private set; }

        /// <summary>Creates an empty context on <paramref name="model"/>; null parameters mean
        /// <see cref="ContextParams.Default"/>.</summary>
        public Context(Model model, ContextParams? parameters = null)
        {
            if (model == null) throw new ArgumentNullException("model");
            var p = parameters ?? ContextParams.Default();
            ContextHandle handle;
            Native.Check(Native.kolibri_context_new(model.Handle, ref p, out handle));
            Handle = handle;
            Model = model;
        }

        /// <summary>Frees the context and its worker threads. Idempotent.</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>Evaluates tokens at the next positions and keeps the last one's logits. On
        /// failure (InvalidToken, ContextFull, ...) the context is unchanged.</summary>
        public void Eval(params int[] tokens)
        {
            if (tokens == null) throw new ArgumentNullException("tokens");
            Native.Check(Native.kolibri_context_eval(Handle, tokens, new UIntPtr((uint)tokens.Length)));
        }

        /// <summary>A copy of the last evaluated position's logits, one per vocabulary entry.
        /// Throws InvalidState before the first Eval or after Rewind.</summary>
        public float[] GetLogits()
        {
            IntPtr data;
            UIntPtr n;
            Native.Check(Native.kolibri_context_logits(Handle, out data, out n));
            // The native array lives until the next eval, rewind or free: copy it now.
            var logits = new float[(int)n.ToUInt64()];
            Marshal.Copy(data, logits, 0, logits.Length);
            GC.KeepAlive(this);
            return logits;
        }

        /// <summary>Keeps the first <paramref name="nKeep"/> tokens and forgets the rest.</summary>
        public void Rewind(int nKeep)
        {
            if (nKeep < 0) throw new ArgumentOutOfRangeException("nKeep");
            Native.Check(Native.kolibri_context_rewind(Handle, new UIntPtr((uint)nKeep)));
        }

        /// <summary>The number of tokens the context holds.</summary>
        public int TokenCount
        {
            get
            {
                UIntPtr held, capacity;
                Native.Check(Native.kolibri_context_size(Handle, out held, out capacity));
                return (int)held.ToUInt64();
            }
        }

        /// <summary>The most tokens the context can hold (n_ctx).</summary>
        public int Capacity
        {
            get
            {
                UIntPtr held, capacity;
                Native.Check(Native.kolibri_context_size(Handle, out held, out capacity));
                return (int)capacity.ToUInt64();
            }
        }

        /// <summary>The tokens the context holds, in position order (after
        /// <see cref="LoadState"/>: the saved ones).</summary>
        public int[] Tokens()
        {
            UIntPtr held, capacity;
            Native.Check(Native.kolibri_context_size(Handle, out held, out capacity));
            var tokens = new int[checked((int)held.ToUInt64() + 1)]; // one spare: never an empty buffer
            Native.Check(Native.kolibri_context_tokens(Handle, tokens, new UIntPtr((ulong)tokens.Length), out held));
            Array.Resize(ref tokens, (int)held.ToUInt64());
            return tokens;
        }

        /// <summary>The context's state: its tokens, KV cache and last logits. The bytes name
        /// the model and the format version and carry a checksum; <see cref="LoadState"/> on a
        /// context of the same model and KV cache types continues exactly where this one is.</summary>
        public byte[] SaveState()
        {
            UIntPtr size, written;
            Native.Check(Native.kolibri_context_state_size(Handle, out size));
            var state = new byte[checked((int)size.ToUInt64())];
            Native.Check(Native.kolibri_context_state_save(Handle, state, size, out written));
            if (written.ToUInt64() < (ulong)state.Length)
                Array.Resize(ref state, (int)written.ToUInt64());
            return state;
        }

        /// <summary>Replaces the context's contents (tokens, KV cache, logits) with a state from
        /// <see cref="SaveState"/>.</summary>
        /// <exception cref="KolibriException">BadState for a state that does not fit (truncated,
        /// corrupted, another model's or KV cache type's); the context is then unchanged.</exception>
        public void LoadState(byte[] state)
        {
            if (state == null) throw new ArgumentNullException("state");
            Native.Check(Native.kolibri_context_state_load(Handle, state, new UIntPtr((ulong)state.Length)));
        }

        /// <summary>Writes <see cref="SaveState"/>'s bytes to the file at <paramref name="path"/>
        /// (beside it, then renamed into place: whole or not at all).</summary>
        /// <exception cref="KolibriException">Io if the file cannot be written.</exception>
        public void SaveStateFile(string path)
        {
            var cpath = Native.ToUtf8Z(path, "path");
            Native.Check(Native.kolibri_context_state_save_file(Handle, cpath));
        }

        /// <summary><see cref="LoadState"/> from a file written by <see cref="SaveStateFile"/>.</summary>
        /// <exception cref="KolibriException">Io if the file cannot be read; BadState as for
        /// <see cref="LoadState"/> (the context is then unchanged).</exception>
        public void LoadStateFile(string path)
        {
            var cpath = Native.ToUtf8Z(path, "path");
            Native.Check(Native.kolibri_context_state_load_file(Handle, cpath));
        }
    }
}
