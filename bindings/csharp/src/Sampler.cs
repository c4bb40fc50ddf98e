using System;

namespace Kolibri
{
    /// <summary>Picks tokens from a context's logits. Use from one thread at a time.</summary>
    public sealed class Sampler : IDisposable
    {
        /// <summary>The native handle (for advanced interop).</summary>
        public SamplerHandle Handle { get; private set; }

        /// <summary>Creates a sampler; null parameters mean <see cref="SamplerParams.Default"/>.</summary>
        public Sampler(SamplerParams? parameters = null)
        {
            var p = parameters ?? SamplerParams.Default();
            SamplerHandle handle;
            Native.Check(Native.kolibri_sampler_new(ref p, out handle));
            Handle = handle;
        }

        /// <summary>A greedy sampler (temperature 0): always the highest logit.</summary>
        public static Sampler Greedy()
        {
            var p = SamplerParams.Default();
            p.Temperature = 0;
            return new Sampler(p);
        }

        /// <summary>Frees the sampler. Idempotent.</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>Picks the next token from <paramref name="context"/>'s last logits and
        /// accepts it. Feed it back with <see cref="Context.Eval"/>.</summary>
        public int Sample(Context context)
        {
            if (context == null) throw new ArgumentNullException("context");
            int token;
            Native.Check(Native.kolibri_sampler_sample(Handle, context.Handle, out token));
            return token;
        }

        /// <summary>Records a token for the penalties without sampling it.</summary>
        public void Accept(int token) { Native.Check(Native.kolibri_sampler_accept(Handle, token)); }

        /// <summary>Forgets accepted tokens and restarts the random generator from the seed.</summary>
        public void Reset() { Native.Check(Native.kolibri_sampler_reset(Handle)); }
    }
}
