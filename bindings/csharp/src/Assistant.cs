using System;

namespace Kolibri
{
    /// <summary>
    /// Gemma 4's assistant drafter (a gemma4-assistant file), loaded for one target model;
    /// <see cref="Speculator.WithAssistant"/> drafts with it. It keeps no KV cache: it reads the
    /// target context's. Immutable: usable from any number of threads at once.
    /// </summary>
    public sealed class Assistant : IDisposable
    {
        /// <summary>The native handle (for advanced interop).</summary>
        public AssistantHandle Handle { get; private set; }

        Assistant(AssistantHandle handle) { Handle = handle; }

        /// <summary>Loads the assistant file at <paramref name="path"/> for
        /// <paramref name="target"/>, checking that it belongs to it.</summary>
        /// <exception cref="KolibriException">InvalidArgument for a file that is not an
        /// assistant or an assistant for another model; Io or InvalidModel for an unreadable
        /// or broken file.</exception>
        public static Assistant Load(Model target, string path)
        {
            if (target == null) throw new ArgumentNullException("target");
            if (target.Handle.IsClosed) throw new ObjectDisposedException("target");
            var cpath = Native.ToUtf8Z(path, "path");
            AssistantHandle handle;
            Native.Check(Native.kolibri_assistant_load(target.Handle, cpath, out handle));
            return new Assistant(handle);
        }

        /// <summary>Frees the assistant; speculators created from it stay usable. Idempotent.</summary>
        public void Dispose() { Handle.Dispose(); }
    }
}
