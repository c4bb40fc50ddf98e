//! Logits processing and seeded token sampling.
//!
//! [`Sampler`] applies llama.cpp's default chain: repetition / frequency / presence
//! penalties over the last `penalty_last_n` accepted tokens, then top-k, top-p, min-p,
//! temperature and a draw from the softmax using a seeded xoshiro256** PRNG, so a given
//! seed reproduces the same tokens on every platform. `temperature <= 0` is greedy decoding
//! (argmax after penalties, ties to the lowest id).
//!
//! Built for 150k–262k vocabularies: top-k uses quickselect, top-p/min-p pre-filter before
//! sorting, and the candidate buffer is reused across calls. NaN logits count as `-inf`;
//! every truncation keeps at least one candidate.

mod chain;
mod params;
mod penalties;
mod rng;
mod sampler;

pub use chain::{argmax, log_softmax, Candidate};
pub use params::{SamplerParams, SamplingError, DEFAULT_SEED};
pub use rng::Xoshiro256StarStar;
pub use sampler::Sampler;

pub type TokenId = u32;
