//! Path selection, the self-test, and errors instead of panics.

use kolibri::kernels::{self, Backend, CpuPath, KernelError, QuantizedActivations, WeightMatrix};
use kolibri::quant::{GgmlType, QK_K};

use super::*;

#[test]
fn path_selection_and_forcing() {
    let best = CpuPath::best_available();
    assert!(CpuPath::Scalar.is_available());
    assert_eq!(kernels::resolve_cpu_path(None), (best, None));
    assert_eq!(kernels::resolve_cpu_path(Some("")), (best, None));
    assert_eq!(
        kernels::resolve_cpu_path(Some("scalar")),
        (CpuPath::Scalar, None)
    );
    assert_eq!(kernels::resolve_cpu_path(Some("SCALAR")).0, CpuPath::Scalar);
    let (p, warn) = kernels::resolve_cpu_path(Some("nonsense"));
    assert_eq!(p, best);
    assert!(warn.is_some());
    for req in [
        CpuPath::Avx2,
        CpuPath::Avx512,
        CpuPath::Amx,
        CpuPath::Neon,
        CpuPath::Dotprod,
        CpuPath::I8mm,
    ] {
        let (p, warn) = kernels::resolve_cpu_path(Some(req.name()));
        if req.is_available() {
            assert_eq!((p, warn), (req, None));
        } else {
            // Asking for more than the CPU has: best available, with a warning.
            assert_eq!(p, best);
            assert!(warn.is_some());
        }
    }
    assert!(kernels::backend().path().is_available());
}

#[test]
fn errors_instead_of_panics() {
    assert!(!kernels::supports(GgmlType::IQ2_XXS));
    for ty in types() {
        assert!(kernels::supports(ty), "{ty}");
    }
    let x = vec![0.5f32; 64];
    assert_eq!(
        QuantizedActivations::quantize(&x, 1, 64, GgmlType::IQ2_XXS).err(),
        Some(KernelError::UnsupportedType(GgmlType::IQ2_XXS))
    );
    // Row length not a multiple of the activation block.
    assert!(matches!(
        QuantizedActivations::quantize(&x, 1, 64, GgmlType::Q4_K),
        Err(KernelError::Shape(_))
    ));
    assert!(matches!(
        QuantizedActivations::quantize(&x, 2, 64, GgmlType::Q8_0),
        Err(KernelError::Shape(_))
    ));

    let mut rng = Rng(1);
    let w = random_weights(GgmlType::Q4_0, 3, 64, &mut rng);
    let wm = WeightMatrix {
        ty: GgmlType::Q4_0,
        rows: 3,
        k: 64,
        data: w.bytes(),
    };
    let act = QuantizedActivations::quantize(&x, 1, 64, GgmlType::Q8_0).unwrap();
    let mut out = vec![0.0; 3];
    kernels::matmul(&wm, &act, &mut out).unwrap();
    let mut short = vec![0.0; 2];
    assert!(matches!(
        kernels::matmul(&wm, &act, &mut short),
        Err(KernelError::Shape(_))
    ));
    let bad = WeightMatrix {
        data: &w.bytes()[..50],
        ..wm
    };
    assert!(matches!(
        kernels::matmul(&bad, &act, &mut out),
        Err(KernelError::Shape(_))
    ));
    let f32_act = QuantizedActivations::quantize(&x, 1, 64, GgmlType::F32).unwrap();
    assert!(matches!(
        kernels::matmul(&wm, &f32_act, &mut out),
        Err(KernelError::ActivationFormat { .. })
    ));
    let unsupported = WeightMatrix {
        ty: GgmlType::IQ2_XXS,
        ..wm
    };
    assert_eq!(
        kernels::matmul(&unsupported, &act, &mut out),
        Err(KernelError::UnsupportedType(GgmlType::IQ2_XXS))
    );
}

#[test]
fn activations_shared_across_weight_types() {
    // Q4_K and Q6_K (e.g. attn_q and attn_v of a Q4_K_M model) share one Q8_K quantization.
    let mut rng = Rng(3);
    let k = 2 * QK_K;
    let x = rng.floats(2 * k, 1.0);
    let act = QuantizedActivations::quantize(&x, 2, k, GgmlType::Q4_K).unwrap();
    assert_eq!(act.format(), kernels::ActFormat::Q8K);
    for ty in [GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_K] {
        let w = random_weights(ty, 4, k, &mut rng);
        let wm = WeightMatrix {
            ty,
            rows: 4,
            k,
            data: w.bytes(),
        };
        let mut out = vec![0.0; 8];
        kernels::matmul(&wm, &act, &mut out).unwrap();
        assert!(out.iter().all(|v| v.is_finite()));
    }
}

#[test]
fn self_test_passes_on_every_available_path() {
    for b in Backend::available() {
        assert_eq!(b.self_test(), Ok(()), "{}", b.path());
    }
}
