namespace Kolibri
{
    /// <summary>Facts about the loaded native library.</summary>
    public static class Library
    {
        /// <summary>The header version these bindings mirror (KOLIBRI_VERSION_*).</summary>
        public const string HeaderVersion = "0.1.0";

        /// <summary>The library's version, "MAJOR.MINOR.PATCH".</summary>
        public static string Version { get { return Native.FromUtf8Z(Native.kolibri_version()); } }

        /// <summary>The library's version as MAJOR * 1000000 + MINOR * 1000 + PATCH.</summary>
        public static uint VersionNumber { get { return Native.kolibri_version_number(); } }

        /// <summary>The machine as Kolibri sees it: CPU features and the kernels chosen.</summary>
        public static string SystemInfo()
        {
            return Native.GetString((byte[] b, System.UIntPtr c, out System.UIntPtr n) => Native.kolibri_system_info(b, c, out n));
        }

        /// <summary>The library's English name for a status ("invalid argument", ...).</summary>
        public static string StatusName(Status status)
        {
            return Native.FromUtf8Z(Native.kolibri_status_string((int)status));
        }
    }
}
