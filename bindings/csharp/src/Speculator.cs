using System;

namespace Kolibri
{
    /// <summary>
    /// Speculative decoding on a target context: each <see cref="Step"/> drafts a few tokens,
    /// checks them all in one pass of the target and returns the tokens the target agrees with
    /// plus the one it chose next. Greedy output is exactly plain decoding's; sampled output
    /// keeps the target's distribution.
    /// </summary>
    /// <remarks>
    /// Drafts come from a draft context (a smaller model with the target's vocabulary), from
    /// the target model's own multi-token-prediction block (<see cref="WithMtp"/>) or its
    /// assistant (<see cref="WithAssistant"/>), or from prompt lookup (the last tokens matched against the sequence so far).
    /// The speculator references both contexts and passes them to every step; they stay the
    /// caller's to dispose. Use a speculator, its contexts and the sampler from one thread at a
    /// time (<see cref="Status.InvalidState"/> otherwise).
    /// </remarks>
    public sealed class Speculator : IDisposable
    {
        /// <summary>The native handle (for advanced interop).</summary>
        public SpeculatorHandle Handle { get; private set; }

        /// <summary>The context the speculator decodes on.</summary>
        public Context Target { get; private set; }

        /// <summary>The draft context, or null (prompt lookup, the model's own drafter).</summary>
        public Context Draft { get; private set; }

        /// <summary>Most tokens drafted per step; a step returns at most MaxDraft + 1 tokens.</summary>
        public int MaxDraft { get; private set; }

        /// <summary>Creates a speculator for <paramref name="target"/>'s sequence.
        /// <paramref name="draft"/> is null for prompt lookup; otherwise its model must share
        /// the target's vocabulary token by token and be smaller, and it must hold as many
        /// positions as the target. Null parameters mean <see cref="SpeculatorParams.Default"/>.</summary>
        /// <exception cref="KolibriException">InvalidArgument for a draft that does not fit the
        /// target or a parameter out of range (MaxDraft 1..32, LookupNgram 1..16, DraftPMin 0..1).</exception>
        public Speculator(Context target, Context draft = null, SpeculatorParams? parameters = null)
        {
            if (target == null) throw new ArgumentNullException("target");
            if (ReferenceEquals(draft, target)) throw new ArgumentException("the draft context is the target context", "draft");
            ThrowIfDisposed(target.Handle, "target");
            if (draft != null) ThrowIfDisposed(draft.Handle, "draft");
            var p = parameters ?? SpeculatorParams.Default();
            SpeculatorHandle handle;
            if (draft == null)
                Native.Check(Native.kolibri_speculator_new_lookup(target.Handle, IntPtr.Zero, ref p, out handle));
            else
                Native.Check(Native.kolibri_speculator_new(target.Handle, draft.Handle, ref p, out handle));
            Handle = handle;
            Target = target;
            Draft = draft;
            MaxDraft = (int)p.MaxDraft;
        }

        Speculator(SpeculatorHandle handle, Context target, int maxDraft)
        {
            Handle = handle;
            Target = target;
            MaxDraft = maxDraft;
        }

        /// <summary>A speculator for <paramref name="target"/>'s sequence that drafts with the
        /// target model's own multi-token-prediction block (a model loaded with
        /// <see cref="ModelOptions.MtpBlocks"/> 1) and, with <paramref name="lookup"/>, by
        /// prompt lookup first. From now on the target keeps the hidden states the block reads;
        /// call <see cref="Prepare"/> after each <see cref="Context.Eval"/> of the prompt.</summary>
        /// <exception cref="KolibriException">InvalidArgument for a model loaded without its
        /// block or a parameter out of range.</exception>
        public static Speculator WithMtp(Context target, SpeculatorParams? parameters = null, bool lookup = false)
        {
            if (target == null) throw new ArgumentNullException("target");
            ThrowIfDisposed(target.Handle, "target");
            var p = parameters ?? SpeculatorParams.Default();
            SpeculatorHandle handle;
            Native.Check(Native.kolibri_speculator_new_mtp(target.Handle, ref p, lookup, out handle));
            return new Speculator(handle, target, (int)p.MaxDraft);
        }

        /// <summary>A speculator for <paramref name="target"/>'s sequence that drafts with
        /// <paramref name="assistant"/> (loaded for the target's model) and, with
        /// <paramref name="lookup"/>, by prompt lookup first. From now on the target keeps the
        /// hidden states the assistant reads; call <see cref="Prepare"/> after each
        /// <see cref="Context.Eval"/> of the prompt. The speculator keeps what it needs: the
        /// assistant may be disposed.</summary>
        /// <exception cref="KolibriException">InvalidArgument for an assistant loaded for
        /// another model or a parameter out of range.</exception>
        public static Speculator WithAssistant(Context target, Assistant assistant, SpeculatorParams? parameters = null,
            bool lookup = false)
        {
            if (target == null) throw new ArgumentNullException("target");
            if (assistant == null) throw new ArgumentNullException("assistant");
            ThrowIfDisposed(target.Handle, "target");
            ThrowIfDisposed(assistant.Handle, "assistant");
            var p = parameters ?? SpeculatorParams.Default();
            SpeculatorHandle handle;
            Native.Check(Native.kolibri_speculator_new_assistant(target.Handle, assistant.Handle, ref p, lookup,
                out handle));
            return new Speculator(handle, target, (int)p.MaxDraft);
        }

        /// <summary>Brings the drafter up to what the target holds: a draft context reads the
        /// prompt now (as prompt processing) rather than in the first step; the model's own
        /// block reads what the target's last evaluation evaluated. Prompt lookup has nothing
        /// to do.</summary>
        public void Prepare()
        {
            ThrowIfDisposed(Handle, "speculator");
            ThrowIfDisposed(Target.Handle, "target");
            if (Draft == null)
                Native.Check(Native.kolibri_speculator_prepare_nodraft(Handle, Target.Handle, IntPtr.Zero));
            else
            {
                ThrowIfDisposed(Draft.Handle, "draft");
                Native.Check(Native.kolibri_speculator_prepare(Handle, Target.Handle, Draft.Handle));
            }
        }

        /// <summary>Frees the speculator (its contexts stay the caller's). Idempotent.</summary>
        public void Dispose() { Handle.Dispose(); }

        /// <summary>One speculative step after <paramref name="pending"/>, the token last
        /// sampled (by <see cref="Sampler.Sample"/> or an earlier step) and not yet evaluated.
        /// Returns the tokens generated: at least one, at most MaxDraft + 1. The last is the new
        /// pending token; the others are in the target context now, and the sampler has
        /// accepted all of them. A step stops after an end-of-generation token. Afterwards the
        /// target has no logits: step again, or <see cref="Context.Eval"/> the pending token.</summary>
        /// <exception cref="KolibriException">ContextFull (no room for the pending token),
        /// InvalidToken, Cancelled, InvalidState; the contexts and the sampler are then as
        /// before, and the step can be retried.</exception>
        public int[] Step(Sampler sampler, int pending)
        {
            if (sampler == null) throw new ArgumentNullException("sampler");
            ThrowIfDisposed(Handle, "speculator");
            ThrowIfDisposed(Target.Handle, "target");
            if (Draft != null) ThrowIfDisposed(Draft.Handle, "draft");
            ThrowIfDisposed(sampler.Handle, "sampler");
            var tokens = new int[MaxDraft + 1];
            UIntPtr n;
            var capacity = new UIntPtr((uint)tokens.Length);
            if (Draft == null)
                Native.Check(Native.kolibri_speculator_step_lookup(Handle, Target.Handle, IntPtr.Zero, sampler.Handle, pending,
                    tokens, capacity, out n));
            else
                Native.Check(Native.kolibri_speculator_step(Handle, Target.Handle, Draft.Handle, sampler.Handle, pending,
                    tokens, capacity, out n));
            Array.Resize(ref tokens, (int)n.ToUInt64());
            return tokens;
        }

        /// <summary>Throws ObjectDisposedException for a disposed handle before any handle is
        /// marshalled: mono does not release the handles marshalled before one that throws,
        /// which would keep them (and their native objects) alive after Dispose.</summary>
        static void ThrowIfDisposed(System.Runtime.InteropServices.SafeHandle handle, string what)
        {
            if (handle.IsClosed) throw new ObjectDisposedException(what);
        }

        /// <summary>What the speculator achieved so far.</summary>
        public SpeculatorStats Stats
        {
            get
            {
                SpeculatorStats stats;
                Native.Check(Native.kolibri_speculator_get_stats(Handle, out stats));
                return stats;
            }
        }
    }
}
