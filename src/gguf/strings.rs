//! Packed string arrays: a vocabulary's 150k-260k token texts (or a merge list) in one buffer.

/// Strings per anchor: string `i` starts at its anchor plus at most `ANCHOR - 1` lengths.
const ANCHOR: usize = 8;
/// A length byte that means "255 bytes or more: see `long`".
const LONG: u8 = u8::MAX;

/// Strings one after another in one buffer, with each string's byte length in one byte (255
/// and longer in a side list) and every 8th string's start: 1.5 bytes of index per string
/// where u32 ends took 4 (a 262k vocabulary: 0.4 MB instead of 1). Finding string `i` adds up
/// to 7 lengths: measured on a 351 KB text, encoding took within 5% of the u32 ends' time
/// (every 32nd string: 7-30% slower on Qwen2.5's BPE vocabulary, which looks texts up most).
#[derive(Clone, Debug, Default)]
pub(super) struct PackedStrings {
    text: String,
    lens: Vec<u8>,
    /// `(index, byte length)` of each string of 255 bytes or more, by index.
    long: Vec<(u32, u32)>,
    /// Starts of strings 0, 8, 16, ...
    anchors: Vec<u32>,
}

impl PackedStrings {
    /// Empty, with room for `n` strings.
    pub fn with_capacity(n: usize) -> PackedStrings {
        PackedStrings {
            lens: Vec::with_capacity(n),
            anchors: Vec::with_capacity(n.div_ceil(ANCHOR)),
            ..PackedStrings::default()
        }
    }

    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// Appends `s`; false, with nothing appended, past 4 GiB of text or 2^32 strings.
    pub fn push(&mut self, s: &str) -> bool {
        let i = self.lens.len();
        let (Ok(index), Ok(start), Ok(len)) = (
            u32::try_from(i),
            u32::try_from(self.text.len()),
            u32::try_from(s.len()),
        ) else {
            return false;
        };
        if start.checked_add(len).is_none() {
            return false;
        }
        if i.is_multiple_of(ANCHOR) {
            self.anchors.push(start);
        }
        match u8::try_from(len) {
            Ok(short) if short < LONG => self.lens.push(short),
            _ => {
                self.long.push((index, len));
                self.lens.push(LONG);
            }
        }
        self.text.push_str(s);
        true
    }

    /// Byte length of string `i` (`i` in range).
    fn byte_len(&self, i: usize) -> Option<usize> {
        match *self.lens.get(i)? {
            LONG => {
                let at = self
                    .long
                    .binary_search_by_key(&(i as u32), |&(j, _)| j)
                    .ok()?;
                Some(self.long[at].1 as usize)
            }
            n => Some(n as usize),
        }
    }

    /// String `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<&str> {
        let len = self.byte_len(i)?;
        let first = i / ANCHOR * ANCHOR;
        let mut start = *self.anchors.get(i / ANCHOR)? as usize;
        for j in first..i {
            start += self.byte_len(j)?;
        }
        self.text.get(start..start + len)
    }

    /// Frees the spare capacity left by growing while reading.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.lens.shrink_to_fit();
        self.long.shrink_to_fit();
        self.anchors.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_of_every_length_read_back_across_anchors() {
        // Lengths 0..600 (short, exactly 254 and 255, long) in an irregular order, so long
        // strings sit at and between anchors.
        let texts: Vec<String> = (0..1000)
            .map(|i: usize| {
                let len = (i * 7919) % 600;
                let c = char::from(b'a' + (i % 26) as u8);
                // Some multi-byte text too: slicing must land on character boundaries.
                if i.is_multiple_of(5) {
                    "é".repeat(len / 2)
                } else {
                    c.to_string().repeat(len)
                }
            })
            .collect();
        let mut packed = PackedStrings::with_capacity(4);
        for t in &texts {
            assert!(packed.push(t));
        }
        packed.shrink_to_fit();
        assert_eq!(packed.len(), texts.len());
        assert!(packed.long.len() > 100, "long strings are exercised");
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(packed.get(i), Some(t.as_str()), "string {i}");
        }
        assert_eq!(packed.get(texts.len()), None);
        assert_eq!(PackedStrings::default().get(0), None);
    }
}
