using System;

namespace Kolibri
{
    /// <summary>A failed Kolibri call: its status and the library's message (kolibri_last_error).</summary>
    public class KolibriException : Exception
    {
        /// <summary>The status the call returned.</summary>
        public Status Status { get; private set; }

        /// <summary>The library's description of the failure.</summary>
        public string NativeMessage { get; private set; }

        /// <summary>Creates the exception for a status and its message.</summary>
        public KolibriException(Status status, string nativeMessage)
            : base(Library.StatusName(status) + (string.IsNullOrEmpty(nativeMessage) ? "" : ": " + nativeMessage))
        {
            Status = status;
            NativeMessage = nativeMessage ?? "";
        }
    }
}
