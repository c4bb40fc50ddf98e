//! Sentence embeddings from a context's hidden states ([`super::Context::embed`]): the
//! token vectors pooled into one, L2-normalised as OpenAI's and Ollama's embeddings are.

use super::Model;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The average over tokens.
    Mean,
    /// The first token's vector (BERT-style models).
    Cls,
    /// The last token's vector (the one that has seen every other token).
    Last,
}

impl Pooling {
    /// The model's `<arch>.pooling_type` (llama.cpp's numbering: 1 mean, 2 cls, 3 last, 4
    /// rank: a reranker, whose causal models read the last token too); mean for a model that
    /// records none, as generative models do.
    pub fn of_model(model: &Model) -> Pooling {
        let key = format!("{}.pooling_type", model.arch.name);
        match model.gguf.get_u64(&key) {
            Some(2) => Pooling::Cls,
            Some(3 | 4) => Pooling::Last,
            _ => Pooling::Mean,
        }
    }

    /// Pools `hidden` ([n_tokens, n_embd]) into one unit-length vector of `n_embd`.
    pub fn pool(self, hidden: &[f32], n_embd: usize) -> Vec<f32> {
        let n = hidden.len() / n_embd.max(1);
        let mut out = vec![0f32; n_embd];
        if n == 0 {
            return out;
        }
        match self {
            Pooling::Mean => {
                for row in hidden.chunks_exact(n_embd) {
                    out.iter_mut().zip(row).for_each(|(o, &h)| *o += h);
                }
                out.iter_mut().for_each(|o| *o /= n as f32);
            }
            Pooling::Cls => out.copy_from_slice(&hidden[..n_embd]),
            Pooling::Last => out.copy_from_slice(&hidden[(n - 1) * n_embd..n * n_embd]),
        }
        let norm = out
            .iter()
            .map(|&v| f64::from(v) * f64::from(v))
            .sum::<f64>()
            .sqrt();
        if norm > 0.0 {
            out.iter_mut()
                .for_each(|v| *v = (f64::from(*v) / norm) as f32);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_picks_rows_and_normalises() {
        let hidden = [3.0, 0.0, 0.0, 4.0, 1.0, 1.0];
        let unit = |v: &[f32]| (v.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-6;
        // The mean row is (4/3, 5/3); unit length makes it (4, 5) / sqrt(41).
        let mean = Pooling::Mean.pool(&hidden, 2);
        let expected = [4.0 / 41f32.sqrt(), 5.0 / 41f32.sqrt()];
        assert!(unit(&mean) && mean.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-6));
        assert_eq!(Pooling::Cls.pool(&hidden, 2), [1.0, 0.0]);
        assert_eq!(Pooling::Last.pool(&hidden, 2), [0.70710677, 0.70710677]);
        assert_eq!(Pooling::Mean.pool(&[], 2), [0.0, 0.0]);
    }
}
