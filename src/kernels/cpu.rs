//! CPU paths: which instruction sets this CPU has, in the order the backends build on each
//! other, and how `KOLIBRI_CPU` (and `KOLIBRI_AMX=0`) pick one of them.

use std::fmt;

/// An instruction-set path; each has one [`super::Backend`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CpuPath {
    Scalar,
    /// AVX2 + FMA + F16C.
    Avx2,
    /// AVX-512 F/BW/VL + VNNI (plus the AVX2 set).
    Avx512,
    /// [`CpuPath::Avx512`] plus AMX-INT8 tiles for prompt batches of repacked weights.
    Amx,
    /// aarch64 NEON (every armv8-a core).
    Neon,
    /// aarch64 NEON with the dot-product extension (`sdot`; armv8.2-a+dotprod).
    Dotprod,
    /// [`CpuPath::Dotprod`] plus the int8 matrix-multiply extension (`smmla`; i8mm) for batches.
    I8mm,
}

/// Every path, slowest first within each architecture.
const ALL: [CpuPath; 7] = [
    CpuPath::Scalar,
    CpuPath::Avx2,
    CpuPath::Avx512,
    CpuPath::Amx,
    CpuPath::Neon,
    CpuPath::Dotprod,
    CpuPath::I8mm,
];

impl CpuPath {
    pub fn name(self) -> &'static str {
        match self {
            CpuPath::Scalar => "scalar",
            CpuPath::Avx2 => "avx2",
            CpuPath::Avx512 => "avx512",
            CpuPath::Amx => "amx",
            CpuPath::Neon => "neon",
            CpuPath::Dotprod => "dotprod",
            CpuPath::I8mm => "i8mm",
        }
    }

    /// Whether this CPU (and OS, for AMX's tile state) can run the path.
    pub fn is_available(self) -> bool {
        match self {
            CpuPath::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx2 => x86::avx2(),
            #[cfg(target_arch = "x86_64")]
            CpuPath::Avx512 => x86::avx512(),
            #[cfg(target_arch = "x86_64")]
            CpuPath::Amx => x86::amx(),
            #[cfg(target_arch = "aarch64")]
            CpuPath::Neon => true,
            #[cfg(target_arch = "aarch64")]
            CpuPath::Dotprod => std::arch::is_aarch64_feature_detected!("dotprod"),
            #[cfg(target_arch = "aarch64")]
            CpuPath::I8mm => {
                std::arch::is_aarch64_feature_detected!("dotprod")
                    && std::arch::is_aarch64_feature_detected!("i8mm")
            }
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    /// The path below this one: where a path steps down to when its self-test fails.
    pub fn lower(self) -> CpuPath {
        match self {
            CpuPath::Amx => CpuPath::Avx512,
            CpuPath::Avx512 => CpuPath::Avx2,
            CpuPath::I8mm => CpuPath::Dotprod,
            CpuPath::Dotprod => CpuPath::Neon,
            _ => CpuPath::Scalar,
        }
    }

    /// The fastest path this CPU supports.
    pub fn best_available() -> CpuPath {
        *CpuPath::available().last().unwrap_or(&CpuPath::Scalar)
    }

    /// Every path this CPU supports, slowest first (tests run all of them).
    pub fn available() -> Vec<CpuPath> {
        ALL.into_iter().filter(|p| p.is_available()).collect()
    }

    fn parse(s: &str) -> Option<CpuPath> {
        let s = s.trim().to_ascii_lowercase();
        ALL.into_iter().find(|p| p.name() == s)
    }
}

impl fmt::Display for CpuPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Resolves a `KOLIBRI_CPU` value against what the CPU has. Returns the path and, when the
/// request could not be honoured, a warning for stderr. Asking for more than the CPU has falls
/// back to the best available path (never an illegal instruction).
pub fn resolve_cpu_path(request: Option<&str>) -> (CpuPath, Option<String>) {
    let best = CpuPath::best_available();
    let Some(req) = request.filter(|s| !s.trim().is_empty()) else {
        return (best, None);
    };
    let names: Vec<&str> = ALL.iter().map(|p| p.name()).collect();
    match CpuPath::parse(req) {
        None => (
            best,
            Some(format!(
                "kolibri: KOLIBRI_CPU={req:?} not understood ({}); using {best}",
                names.join("|")
            )),
        ),
        Some(p) if p.is_available() => (p, None),
        Some(p) => (
            best,
            Some(format!(
                "kolibri: KOLIBRI_CPU={p} not supported by this CPU; using {best}"
            )),
        ),
    }
}

/// The path asked for by the environment: `KOLIBRI_CPU`, then `KOLIBRI_AMX=0` keeping an AMX
/// CPU on its AVX-512 path. The warning is for stderr.
pub(super) fn requested_path() -> (CpuPath, Option<String>) {
    let env = std::env::var("KOLIBRI_CPU").ok();
    let (path, warning) = resolve_cpu_path(env.as_deref());
    let amx_off = matches!(std::env::var("KOLIBRI_AMX"), Ok(v) if v.trim() == "0");
    match path {
        CpuPath::Amx if amx_off => (CpuPath::Avx512, warning),
        _ => (path, warning),
    }
}

/// x86 feature detection, one function per path.
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use std::sync::OnceLock;

    pub fn avx2() -> bool {
        is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
    }

    pub fn avx512() -> bool {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512vnni")
            && avx2()
    }

    /// AMX-INT8 (with AVX-512 for the rest), and the OS granting this process the tile
    /// state (Linux asks for it per process; the first call asks).
    pub fn amx() -> bool {
        static ON: OnceLock<bool> = OnceLock::new();
        *ON.get_or_init(|| {
            // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8. Leaf 7 exists on every CPU
            // with AVX-512, checked first.
            avx512()
                && std::arch::x86_64::__cpuid_count(7, 0).edx & (3 << 24) == 3 << 24
                && request_tile_state()
        })
    }

    #[cfg(target_os = "linux")]
    fn request_tile_state() -> bool {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: a syscall with integer arguments; it fails cleanly where unsupported.
        unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            ) == 0
        }
    }

    #[cfg(not(target_os = "linux"))]
    fn request_tile_state() -> bool {
        false
    }
}
