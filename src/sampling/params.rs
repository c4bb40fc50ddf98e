//! Sampler parameters, their llama.cpp-like defaults, and validation.

use std::fmt;

/// Seed used by [`SamplerParams::default`]; fixed so runs are reproducible unless a caller
/// asks otherwise (llama.cpp defaults to a random seed instead).
pub const DEFAULT_SEED: u64 = 0x4B4F_4C49_4252_4921; // "KOLIBRI!"

#[derive(Clone, Debug)]
pub struct SamplerParams {
    /// Softmax temperature; `<= 0` selects greedy decoding (argmax after penalties).
    pub temperature: f32,
    /// Keep the `top_k` highest logits; 0 = off.
    pub top_k: usize,
    /// Nucleus sampling: keep the smallest prefix with probability mass `>= top_p`; 1 = off.
    pub top_p: f32,
    /// Drop tokens whose probability is below `min_p` times the top probability; 0 = off.
    pub min_p: f32,
    /// CTRL repetition penalty (positive logits divided, negative multiplied); 1 = off.
    pub repeat_penalty: f32,
    /// OpenAI frequency penalty: `logit -= count * frequency_penalty`.
    pub frequency_penalty: f32,
    /// OpenAI presence penalty: `logit -= presence_penalty` for any token seen at least once.
    pub presence_penalty: f32,
    /// How many most recently accepted tokens the penalties look at; 0 disables penalties.
    pub penalty_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerParams {
    fn default() -> Self {
        Self {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            penalty_last_n: 64,
            seed: DEFAULT_SEED,
        }
    }
}

impl SamplerParams {
    /// Deterministic argmax decoding, all truncation and penalties off.
    pub fn greedy() -> Self {
        Self {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            ..Self::default()
        }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    pub fn validate(&self) -> Result<(), SamplingError> {
        let bad = |name, value, reason| {
            Err(SamplingError::InvalidParam {
                name,
                value,
                reason,
            })
        };
        if !self.temperature.is_finite() {
            return bad("temperature", self.temperature, "must be finite");
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return bad("top_p", self.top_p, "must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&self.min_p) {
            return bad("min_p", self.min_p, "must be in [0, 1]");
        }
        if !(self.repeat_penalty.is_finite() && self.repeat_penalty > 0.0) {
            return bad(
                "repeat_penalty",
                self.repeat_penalty,
                "must be finite and > 0",
            );
        }
        if !self.frequency_penalty.is_finite() {
            return bad(
                "frequency_penalty",
                self.frequency_penalty,
                "must be finite",
            );
        }
        if !self.presence_penalty.is_finite() {
            return bad("presence_penalty", self.presence_penalty, "must be finite");
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum SamplingError {
    InvalidParam {
        name: &'static str,
        value: f32,
        reason: &'static str,
    },
}

impl fmt::Display for SamplingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SamplingError::InvalidParam {
                name,
                value,
                reason,
            } => {
                write!(f, "invalid sampler parameter {name} = {value}: {reason}")
            }
        }
    }
}

impl std::error::Error for SamplingError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_greedy_are_valid() {
        assert!(SamplerParams::default().validate().is_ok());
        assert!(SamplerParams::greedy().validate().is_ok());
        assert!(SamplerParams::greedy().is_greedy());
        assert!(!SamplerParams::default().is_greedy());
    }

    #[test]
    fn rejects_bad_values() {
        let cases: [fn(&mut SamplerParams); 9] = [
            |p| p.temperature = f32::NAN,
            |p| p.temperature = f32::INFINITY,
            |p| p.top_p = -0.1,
            |p| p.top_p = f32::NAN,
            |p| p.top_p = 1.5,
            |p| p.min_p = f32::NAN,
            |p| p.repeat_penalty = 0.0,
            |p| p.frequency_penalty = f32::NAN,
            |p| p.presence_penalty = f32::NEG_INFINITY,
        ];
        for set in cases {
            let mut p = SamplerParams::default();
            set(&mut p);
            let err = p.validate().unwrap_err();
            assert!(err.to_string().contains("invalid sampler parameter"));
        }
        // Negative temperature is a legal way to ask for greedy decoding.
        let p = SamplerParams {
            temperature: -1.0,
            ..SamplerParams::default()
        };
        assert!(p.validate().is_ok());
    }
}
