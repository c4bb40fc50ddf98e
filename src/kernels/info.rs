//! What the CPU offers and what the kernels chose, for `kolibri_system_info` and the CLI.

use super::{backend, CpuPath};

/// SIMD features of this CPU that Kolibri's kernels care about.
pub fn cpu_features() -> Vec<&'static str> {
    let mut found = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => {$(
                if std::arch::is_x86_feature_detected!($f) {
                    found.push($f);
                }
            )*};
        }
        probe!(
            "sse4.2",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "avx512f",
            "avx512bw",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avxvnni"
        );
        if CpuPath::Amx.is_available() {
            found.push("amx-int8");
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        macro_rules! probe {
            ($($f:tt),*) => {$(
                if std::arch::is_aarch64_feature_detected!($f) {
                    found.push($f);
                }
            )*};
        }
        probe!("neon", "fp16", "dotprod", "i8mm", "sve");
    }
    found
}

/// One line: architecture, CPU features, the kernel path in use and the paths available.
pub fn system_info() -> String {
    let available: Vec<&str> = CpuPath::available().iter().map(|p| p.name()).collect();
    let tiles = match backend().path() {
        CpuPath::Amx => " (amx tiles for prompt batches; KOLIBRI_AMX=0 turns them off)",
        _ => "",
    };
    format!(
        "arch: {}; cpu features: {}; kernels: {}{tiles} (available: {}; override with KOLIBRI_CPU)",
        std::env::consts::ARCH,
        cpu_features().join(" "),
        backend().path().name(),
        available.join(", ")
    )
}
