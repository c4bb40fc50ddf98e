//! GPT-2's reversible byte <-> unicode table: printable bytes map to themselves, the rest to
//! code points from U+0100 up, so every byte string becomes a printable string.

use std::sync::OnceLock;

struct Tables {
    to_char: [char; 256],
    /// Indexed by code point; the table only uses code points below 0x144.
    to_byte: [Option<u8>; 0x200],
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let mut to_char = ['\0'; 256];
        let mut to_byte = [None; 0x200];
        let mut next_extra = 0x100u32;
        for b in 0..=255u8 {
            let cp = if printable(b) {
                b as u32
            } else {
                next_extra += 1;
                next_extra - 1
            };
            to_char[b as usize] = char::from_u32(cp).expect("code point below 0x200");
            to_byte[cp as usize] = Some(b);
        }
        Tables { to_char, to_byte }
    })
}

pub(crate) fn byte_to_char(b: u8) -> char {
    tables().to_char[b as usize]
}

pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    tables().to_byte.get(c as usize).copied().flatten()
}

/// Maps raw bytes to the byte-level alphabet BPE merges are written in.
pub(crate) fn encode_bytes(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_to_char(b)).collect()
}

/// Inverse of [`encode_bytes`]. Characters outside the table pass through as UTF-8, where
/// llama.cpp writes an `[UNK_BYTE_0x..]` marker instead: Command-R's vocabulary has 1403 such
/// tokens (U+200D, `‼`, ...), which Kolibri prints as the characters they are.
pub(crate) fn decode_to_bytes(text: &str, out: &mut Vec<u8>) {
    for c in text.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_bijection_with_known_points() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
    }
}
