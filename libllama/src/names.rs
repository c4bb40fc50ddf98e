//! Names llama.h hands out as static strings.

use std::ffi::CStr;

/// `llama_ftype_name`'s text for a file type, as llama.cpp writes it.
pub fn ftype_name(ftype: i32) -> &'static CStr {
    match ftype & !1024 {
        0 => c"all F32",
        1 => c"F16",
        2 => c"Q4_0",
        3 => c"Q4_1",
        7 => c"Q8_0",
        8 => c"Q5_0",
        9 => c"Q5_1",
        10 => c"Q2_K - Medium",
        11 => c"Q3_K - Small",
        12 => c"Q3_K - Medium",
        13 => c"Q3_K - Large",
        14 => c"Q4_K - Small",
        15 => c"Q4_K - Medium",
        16 => c"Q5_K - Small",
        17 => c"Q5_K - Medium",
        18 => c"Q6_K",
        19 => c"IQ2_XXS - 2.0625 bpw",
        20 => c"IQ2_XS - 2.3125 bpw",
        21 => c"Q2_K - Small",
        22 => c"IQ3_XS - 3.3 bpw",
        23 => c"IQ3_XXS - 3.0625 bpw",
        24 => c"IQ1_S - 1.5625 bpw",
        25 => c"IQ4_NL - 4.5 bpw",
        26 => c"IQ3_S - 3.4375 bpw",
        27 => c"IQ3_S mix - 3.66 bpw",
        28 => c"IQ2_S - 2.5 bpw",
        29 => c"IQ2_M - 2.7 bpw",
        30 => c"IQ4_XS - 4.25 bpw",
        31 => c"IQ1_M - 1.75 bpw",
        32 => c"BF16",
        36 => c"TQ1_0 - 1.69 bpw ternary",
        37 => c"TQ2_0 - 2.06 bpw ternary",
        38 => c"MXFP4 MoE",
        _ => c"unknown, may not work",
    }
}
