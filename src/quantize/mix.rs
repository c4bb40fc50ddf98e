//! File types (llama.cpp's `LLAMA_FTYPE_*` names and ids) and which tensor type each gives a
//! weight: the K-quant mixes spend more bits where errors hurt most (the output matrix, the
//! attention values, the feed-forward down projections of the first, last and every third
//! layer), after llama.cpp's `llama_tensor_get_type`.

use crate::quant::GgmlType;

/// A target file type.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K_S,
    Q3_K_M,
    Q3_K_L,
    Q4_K_S,
    Q4_K_M,
    Q5_K_S,
    Q5_K_M,
    Q6_K,
    IQ4_NL,
    IQ4_XS,
    /// MXFP4 experts, Q8_0 elsewhere (gpt-oss's own mix).
    MXFP4_MOE,
}

use FileType as F;

/// Every file type, with its name and `general.file_type` id.
const FILE_TYPES: [(FileType, &str, u32); 20] = [
    (F::F32, "F32", 0),
    (F::F16, "F16", 1),
    (F::BF16, "BF16", 32),
    (F::Q4_0, "Q4_0", 2),
    (F::Q4_1, "Q4_1", 3),
    (F::Q5_0, "Q5_0", 8),
    (F::Q5_1, "Q5_1", 9),
    (F::Q8_0, "Q8_0", 7),
    (F::Q2_K, "Q2_K", 10),
    (F::Q3_K_S, "Q3_K_S", 11),
    (F::Q3_K_M, "Q3_K_M", 12),
    (F::Q3_K_L, "Q3_K_L", 13),
    (F::Q4_K_S, "Q4_K_S", 14),
    (F::Q4_K_M, "Q4_K_M", 15),
    (F::Q5_K_S, "Q5_K_S", 16),
    (F::Q5_K_M, "Q5_K_M", 17),
    (F::Q6_K, "Q6_K", 18),
    (F::IQ4_NL, "IQ4_NL", 25),
    (F::IQ4_XS, "IQ4_XS", 30),
    (F::MXFP4_MOE, "MXFP4_MOE", 38),
];

impl FileType {
    /// The file type named `name` (case-insensitive; `Q4_K` means Q4_K_M, `Q3_K` Q3_K_M and
    /// `Q5_K` Q5_K_M, as llama-quantize reads them).
    pub fn parse(name: &str) -> Option<FileType> {
        let name = name.to_ascii_uppercase();
        let name = match name.as_str() {
            "Q4_K" => "Q4_K_M",
            "Q3_K" => "Q3_K_M",
            "Q5_K" => "Q5_K_M",
            n => n,
        };
        FILE_TYPES.iter().find(|t| t.1 == name).map(|t| t.0)
    }

    /// The names [`FileType::parse`] accepts.
    pub fn names() -> impl Iterator<Item = &'static str> {
        FILE_TYPES.iter().map(|t| t.1)
    }

    pub fn name(self) -> &'static str {
        FILE_TYPES.iter().find(|t| t.0 == self).map_or("?", |t| t.1)
    }

    /// The `general.file_type` value.
    pub fn id(self) -> u32 {
        FILE_TYPES.iter().find(|t| t.0 == self).map_or(0, |t| t.2)
    }

    /// The file type a `general.file_type` value names.
    pub fn from_id(id: u32) -> Option<FileType> {
        FILE_TYPES.iter().find(|t| t.2 == id).map(|t| t.0)
    }

    /// The type most weights get.
    pub fn base(self) -> GgmlType {
        use GgmlType as G;
        match self {
            F::F32 => G::F32,
            F::F16 => G::F16,
            F::BF16 => G::BF16,
            F::Q4_0 => G::Q4_0,
            F::Q4_1 => G::Q4_1,
            F::Q5_0 => G::Q5_0,
            F::Q5_1 => G::Q5_1,
            F::Q8_0 => G::Q8_0,
            F::Q2_K => G::Q2_K,
            F::Q3_K_S | F::Q3_K_M | F::Q3_K_L => G::Q3_K,
            F::Q4_K_S | F::Q4_K_M => G::Q4_K,
            F::Q5_K_S | F::Q5_K_M => G::Q5_K,
            F::Q6_K => G::Q6_K,
            F::IQ4_NL => G::IQ4_NL,
            F::IQ4_XS => G::IQ4_XS,
            F::MXFP4_MOE => G::MXFP4,
        }
    }
}

/// What a weight matrix is, as far as the mixes care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The output projection (the token embedding where the model ties them).
    Output,
    AttnV,
    AttnOutput,
    /// A fused Q/K/V projection.
    AttnQkv,
    FfnDown,
    Other,
}

impl Role {
    /// The role of tensor `name`; `tied` when the model has no `output.weight`.
    pub fn of(name: &str, tied: bool) -> Role {
        let kind = name.rsplit_once(".weight").map_or(name, |(k, _)| k);
        let kind = kind.rsplit('.').next().unwrap_or(kind);
        match kind {
            "output" => Role::Output,
            "token_embd" if tied => Role::Output,
            "attn_v" => Role::AttnV,
            "attn_output" => Role::AttnOutput,
            "attn_qkv" => Role::AttnQkv,
            k if k.starts_with("ffn_down") => Role::FfnDown,
            _ => Role::Other,
        }
    }
}

/// A weight's place in the model.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub role: Role,
    /// Its layer and the model's layer count (0 outside the layers).
    pub layer: usize,
    pub n_layers: usize,
    /// Query heads per key/value head.
    pub gqa: usize,
    /// A stack of experts' matrices (a third dimension above 1).
    pub experts: bool,
}

/// The first eighth, the last eighth and every third layer between them.
fn more_bits(layer: usize, n: usize) -> bool {
    layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2
}

/// The type file type `ft` gives the weight at `p` (before row-length fallbacks).
pub fn weight_type(ft: FileType, p: &Place) -> GgmlType {
    use GgmlType as G;
    let base = ft.base();
    if !is_quantized(base) {
        return base;
    }
    if ft == F::MXFP4_MOE {
        return if p.experts { G::MXFP4 } else { G::Q8_0 };
    }
    let (i, n) = (p.layer, p.n_layers);
    match p.role {
        Role::Output if base == G::Q8_0 => G::Q8_0,
        Role::Output => G::Q6_K,
        Role::AttnV => match ft {
            F::Q2_K if p.gqa >= 4 => G::Q4_K,
            F::Q2_K => G::Q3_K,
            F::Q3_K_M if i < 2 => G::Q5_K,
            F::Q3_K_M => G::Q4_K,
            F::Q3_K_L => G::Q5_K,
            F::Q4_K_M | F::Q5_K_M if more_bits(i, n) => G::Q6_K,
            F::Q4_K_S if i < 4 => G::Q5_K,
            F::IQ4_NL | F::IQ4_XS if p.gqa >= 4 => G::Q5_K,
            _ => base,
        },
        Role::AttnOutput => match ft {
            F::Q2_K => G::Q3_K,
            F::Q3_K_M => G::Q4_K,
            F::Q3_K_L => G::Q5_K,
            _ => base,
        },
        Role::AttnQkv => match ft {
            F::Q3_K_M | F::Q3_K_L => G::Q4_K,
            F::Q4_K_M => G::Q5_K,
            F::Q5_K_M => G::Q6_K,
            _ => base,
        },
        Role::FfnDown => match ft {
            F::Q2_K => G::Q3_K,
            F::Q3_K_M if i < n / 16 => G::Q5_K,
            F::Q3_K_M => G::Q4_K,
            F::Q3_K_L => G::Q5_K,
            F::Q4_K_M | F::Q5_K_M if more_bits(i, n) => G::Q6_K,
            F::Q4_K_S if i < n / 8 => G::Q5_K,
            F::IQ4_NL | F::IQ4_XS if i < n / 8 => G::Q5_K,
            _ => base,
        },
        Role::Other => base,
    }
}

/// `ty` for a row of `row_len` weights, or the nearest type whose blocks fit it: a row of
/// 896 takes no 256-weight super-blocks.
pub fn fit_row(ty: GgmlType, row_len: u64) -> GgmlType {
    use GgmlType as G;
    let fits = |t: GgmlType| row_len.is_multiple_of(t.block_size() as u64);
    if fits(ty) {
        return ty;
    }
    let fallback = match ty {
        G::IQ4_XS => G::IQ4_NL,
        G::Q2_K | G::Q3_K => G::Q4_0,
        G::Q4_K => G::Q5_0,
        G::Q5_K => G::Q5_1,
        G::Q6_K => G::Q8_0,
        _ => G::F16,
    };
    if fits(fallback) {
        fallback
    } else {
        G::F16
    }
}

/// Whether `ty` is a block-quantized type (not a float).
pub fn is_quantized(ty: GgmlType) -> bool {
    !matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use GgmlType as G;

    fn place(role: Role, layer: usize) -> Place {
        Place {
            role,
            layer,
            n_layers: 24,
            gqa: 7,
            experts: false,
        }
    }

    #[test]
    fn names_round_trip_and_aliases_resolve() {
        for name in FileType::names() {
            let ft = FileType::parse(name).unwrap();
            assert_eq!(ft.name(), name);
            assert_eq!(FileType::parse(&name.to_lowercase()), Some(ft));
        }
        assert_eq!(FileType::parse("q4_k"), Some(F::Q4_K_M));
        assert_eq!(FileType::parse("Q4_K_X"), None);
        assert_eq!(F::Q4_K_M.id(), 15);
    }

    #[test]
    fn q4_k_m_spends_bits_on_output_values_and_some_down_projections() {
        let ft = F::Q4_K_M;
        assert_eq!(weight_type(ft, &place(Role::Output, 0)), G::Q6_K);
        assert_eq!(weight_type(ft, &place(Role::Other, 5)), G::Q4_K);
        // 24 layers: 0-2 and 21-23 get more bits, and every third between.
        let down: Vec<usize> = (0..24)
            .filter(|&i| weight_type(ft, &place(Role::FfnDown, i)) == G::Q6_K)
            .collect();
        assert_eq!(down, [0, 1, 2, 5, 8, 11, 14, 17, 20, 21, 22, 23]);
        assert_eq!(weight_type(ft, &place(Role::AttnV, 3)), G::Q4_K);
        assert_eq!(weight_type(ft, &place(Role::AttnV, 5)), G::Q6_K);
    }

    #[test]
    fn other_mixes_and_single_types() {
        assert_eq!(weight_type(F::Q2_K, &place(Role::AttnV, 3)), G::Q4_K);
        assert_eq!(weight_type(F::Q2_K, &place(Role::FfnDown, 3)), G::Q3_K);
        assert_eq!(weight_type(F::Q3_K_M, &place(Role::AttnV, 1)), G::Q5_K);
        assert_eq!(weight_type(F::Q3_K_M, &place(Role::AttnOutput, 9)), G::Q4_K);
        assert_eq!(weight_type(F::Q8_0, &place(Role::Output, 0)), G::Q8_0);
        assert_eq!(weight_type(F::Q4_0, &place(Role::Output, 0)), G::Q6_K);
        assert_eq!(weight_type(F::Q4_0, &place(Role::FfnDown, 0)), G::Q4_0);
        assert_eq!(weight_type(F::F16, &place(Role::Output, 0)), G::F16);
        let experts = Place {
            experts: true,
            ..place(Role::FfnDown, 3)
        };
        assert_eq!(weight_type(F::MXFP4_MOE, &experts), G::MXFP4);
        assert_eq!(weight_type(F::MXFP4_MOE, &place(Role::FfnDown, 3)), G::Q8_0);
        assert_eq!(weight_type(F::MXFP4_MOE, &place(Role::Output, 0)), G::Q8_0);
    }

    #[test]
    fn rows_that_take_no_super_blocks_fall_back() {
        assert_eq!(fit_row(G::Q4_K, 896), G::Q5_0);
        assert_eq!(fit_row(G::Q6_K, 896), G::Q8_0);
        assert_eq!(fit_row(G::IQ4_XS, 896), G::IQ4_NL);
        assert_eq!(fit_row(G::Q3_K, 896), G::Q4_0);
        assert_eq!(fit_row(G::Q4_K, 1536), G::Q4_K);
        assert_eq!(fit_row(G::Q4_0, 40), G::F16);
    }

    #[test]
    fn roles_from_names() {
        assert_eq!(Role::of("output.weight", false), Role::Output);
        assert_eq!(Role::of("token_embd.weight", true), Role::Output);
        assert_eq!(Role::of("token_embd.weight", false), Role::Other);
        assert_eq!(Role::of("blk.3.attn_v.weight", false), Role::AttnV);
        assert_eq!(Role::of("blk.3.ffn_down_exps.weight", false), Role::FfnDown);
        assert_eq!(Role::of("blk.3.ffn_up.weight", false), Role::Other);
    }
}
