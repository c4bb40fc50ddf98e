using System;
using System.Runtime.InteropServices;

namespace Kolibri
{
    /// <summary>Owns a kolibri_model*; released with kolibri_model_free.</summary>
    public sealed class ModelHandle : SafeHandle
    {
        /// <summary>Creates an invalid handle (the marshaller fills it in).</summary>
        public ModelHandle() : base(IntPtr.Zero, true) { }
        /// <summary>True while no native model is owned.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <summary>Frees the native model.</summary>
        protected override bool ReleaseHandle() { Native.kolibri_model_free(handle); return true; }
    }

    /// <summary>Owns a kolibri_context*; released with kolibri_context_free.</summary>
    public sealed class ContextHandle : SafeHandle
    {
        /// <summary>Creates an invalid handle (the marshaller fills it in).</summary>
        public ContextHandle() : base(IntPtr.Zero, true) { }
        /// <summary>True while no native context is owned.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <summary>Frees the native context.</summary>
        protected override bool ReleaseHandle() { Native.kolibri_context_free(handle); return true; }
    }

    /// <summary>Owns a kolibri_sampler*; released with kolibri_sampler_free.</summary>
    public sealed class SamplerHandle : SafeHandle
    {
        /// <summary>Creates an invalid handle (the marshaller fills it in).</summary>
        public SamplerHandle() : base(IntPtr.Zero, true) { }
        /// <summary>True while no native sampler is owned.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <summary>Frees the native sampler.</summary>
        protected override bool ReleaseHandle() { Native.kolibri_sampler_free(handle); return true; }
    }

    /// <summary>Owns a kolibri_speculator*; released with kolibri_speculator_free.</summary>
    public sealed class SpeculatorHandle : SafeHandle
    {
        /// <summary>Creates an invalid handle (the marshaller fills it in).</summary>
        public SpeculatorHandle() : base(IntPtr.Zero, true) { }
        /// <summary>True while no native speculator is owned.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <summary>Frees the native speculator (its contexts stay the caller's).</summary>
        protected override bool ReleaseHandle() { Native.kolibri_speculator_free(handle); return true; }
    }

    /// <summary>Owns a kolibri_assistant*; released with kolibri_assistant_free.</summary>
    public sealed class AssistantHandle : SafeHandle
    {
        /// <summary>Creates an invalid handle (the marshaller fills it in).</summary>
        public AssistantHandle() : base(IntPtr.Zero, true) { }
        /// <summary>True while no native assistant is owned.</summary>
        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }
        /// <summary>Frees the native assistant (speculators made from it keep what they need).</summary>
        protected override bool ReleaseHandle() { Native.kolibri_assistant_free(handle); return true; }
    }
}
