//! Stop strings in streamed text: text is released only once it cannot be the start of a stop
//! string, so a client never sees part of one ("\n\nUser:" split over three tokens).

pub struct StopMatcher {
    stops: Vec<String>,
    /// Text received but not yet released.
    held: String,
}

impl StopMatcher {
    /// Empty stop strings are ignored (they would match everywhere).
    pub fn new(stops: &[String]) -> StopMatcher {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
        }
    }

    /// Adds text; returns the text that can be released and whether a stop string was found
    /// (the released text then ends just before it, and the stop string is not included).
    pub fn push(&mut self, text: &str) -> (String, bool) {
        self.held.push_str(text);
        let first_stop = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = first_stop {
            let out = self.held[..at].to_string();
            self.held.clear();
            return (out, true);
        }
        let keep = self
            .stops
            .iter()
            .map(|s| longest_prefix_suffix(&self.held, s))
            .max()
            .unwrap_or(0);
        let out = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (out, false)
    }

    /// Releases whatever is held (the stream ended without completing a stop string).
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.held)
    }
}

/// Length of the longest proper prefix of `stop` that `text` ends with.
fn longest_prefix_suffix(text: &str, stop: &str) -> usize {
    (1..stop.len())
        .rev()
        .find(|&k| stop.is_char_boundary(k) && text.ends_with(&stop[..k]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let stops: Vec<String> = stops.iter().map(|s| s.to_string()).collect();
        let mut m = StopMatcher::new(&stops);
        let mut out = String::new();
        for p in pieces {
            let (text, stopped) = m.push(p);
            out.push_str(&text);
            if stopped {
                return (out, true);
            }
        }
        out.push_str(&m.finish());
        (out, false)
    }

    #[test]
    fn stop_split_over_pieces_is_found_and_never_released() {
        let stops = ["\n\nUser:", "END"];
        assert_eq!(
            run(&stops, &["Hello", " there\n", "\nUs", "er: more"]),
            ("Hello there".to_string(), true)
        );
        assert_eq!(
            run(&stops, &["abc E", "N", "D tail"]),
            ("abc ".to_string(), true)
        );
        // A partial match that does not complete is released, unchanged.
        assert_eq!(
            run(&stops, &["x\n\nUse", "d it", " EN"]),
            ("x\n\nUsed it EN".to_string(), false)
        );
        // No stops: everything passes through at once.
        let mut m = StopMatcher::new(&[String::new()]);
        assert_eq!(m.push("a\n\n"), ("a\n\n".to_string(), false));
    }

    #[test]
    fn earliest_stop_wins_and_multibyte_text_is_kept_whole() {
        assert_eq!(run(&["b", "a"], &["xxab"]), ("xx".to_string(), true));
        assert_eq!(
            run(&["é!"], &["caf", "é", "é?"]),
            ("caféé?".to_string(), false)
        );
        assert_eq!(run(&["é!"], &["café", "!"]), ("caf".to_string(), true));
    }
}
