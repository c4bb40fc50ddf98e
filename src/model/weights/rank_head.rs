//! A reranker's scoring head, as llama.cpp's rank pooling computes it: the pooled hidden
//! state (the last token's: every architecture here is causal) through an optional dense
//! layer with tanh (`cls`, BERT-style classifiers), then the classifier rows (`cls.output`;
//! Qwen3-Reranker's are its "yes" and "no" rows of the LM head), softmax over them for Qwen3;
//! the score is the first output.

use super::tensors::Loader;
use crate::model::error::ModelError;

pub struct RankHead {
    /// `cls`: [n_embd, n_embd] and its bias, tanh after.
    dense: Option<Dense>,
    /// `cls.output`: [n_labels, n_in] and its bias.
    classifier: Option<Dense>,
    /// Qwen3's rerankers score with softmax(yes, no)[0].
    softmax: bool,
}

struct Dense {
    /// Row-major [rows, k].
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    k: usize,
}

impl Dense {
    fn load(l: &Loader, name: &str, k: usize, rows: usize) -> Result<Option<Dense>, ModelError> {
        if l.gguf.tensor(&format!("{name}.weight")).is_none() {
            return Ok(None);
        }
        Ok(Some(Dense {
            weight: l.small_matrix(&format!("{name}.weight"), k, rows)?,
            bias: l.vector_opt(&format!("{name}.bias"), rows)?,
            k,
        }))
    }

    /// weight · x + bias.
    fn apply(&self, x: &[f32]) -> Vec<f32> {
        let mut y: Vec<f32> = self
            .weight
            .chunks_exact(self.k)
            .map(|row| row.iter().zip(x).map(|(&w, &v)| w * v).sum())
            .collect();
        if let Some(b) = &self.bias {
            y.iter_mut().zip(b).for_each(|(v, &b)| *v += b);
        }
        y
    }
}

impl RankHead {
    /// The head of a model whose `<arch>.pooling_type` is 4 (rank); `n_labels` from
    /// `<arch>.classifier.output_labels` (1 when absent, as llama.cpp reads it).
    pub(super) fn load(
        l: &Loader,
        arch: &str,
        n_embd: usize,
    ) -> Result<Option<RankHead>, ModelError> {
        if l.gguf.get_u64(&format!("{arch}.pooling_type")) != Some(4) {
            return Ok(None);
        }
        if l.gguf.tensor("cls.norm.weight").is_some() {
            return Err(ModelError::BadHyperparameter {
                key: format!("{arch}.pooling_type"),
                reason: "a rank head with a norm (cls.norm, ModernBERT's) is not supported".into(),
            });
        }
        let labels_key = format!("{arch}.classifier.output_labels");
        let n_labels = match l.gguf.get(&labels_key) {
            Some(crate::gguf::Value::Array(items)) if !items.is_empty() => items.len(),
            _ => 1,
        };
        Ok(Some(RankHead {
            dense: Dense::load(l, "cls", n_embd, n_embd)?,
            classifier: Dense::load(l, "cls.output", n_embd, n_labels)?,
            softmax: arch == "qwen3",
        }))
    }

    /// The relevance score of one sequence from its hidden states ([n_tokens, n_embd], after
    /// the final norm).
    pub fn score(&self, hidden: &[f32], n_embd: usize) -> f32 {
        let n = hidden.len() / n_embd.max(1);
        if n == 0 {
            return 0.0;
        }
        let mut x = hidden[(n - 1) * n_embd..n * n_embd].to_vec();
        if let Some(d) = &self.dense {
            x = d.apply(&x);
            x.iter_mut().for_each(|v| *v = v.tanh());
        }
        if let Some(c) = &self.classifier {
            x = c.apply(&x);
        }
        if self.softmax {
            let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = x.iter().map(|&v| (v - max).exp()).sum();
            return (x[0] - max).exp() / sum;
        }
        x[0]
    }
}

#[cfg(test)]
mod tests {
    use super::{Dense, RankHead};

    #[test]
    fn qwen3_scores_are_the_softmax_of_the_yes_row() {
        // Rows "yes" = [1, 0], "no" = [0, 1]: the score is sigmoid(h0 - h1) of the last token.
        let head = RankHead {
            dense: None,
            classifier: Some(Dense {
                weight: vec![1.0, 0.0, 0.0, 1.0],
                bias: None,
                k: 2,
            }),
            softmax: true,
        };
        let hidden = [9.0, -9.0, 2.0, 1.0];
        let want = 1.0 / (1.0 + (-1.0f32).exp());
        assert!((head.score(&hidden, 2) - want).abs() < 1e-6);
    }

    #[test]
    fn a_dense_layer_goes_through_tanh_and_the_bias_is_added() {
        let head = RankHead {
            dense: Some(Dense {
                weight: vec![1.0],
                bias: Some(vec![0.5]),
                k: 1,
            }),
            classifier: Some(Dense {
                weight: vec![2.0],
                bias: Some(vec![-1.0]),
                k: 1,
            }),
            softmax: false,
        };
        assert!((head.score(&[0.25], 1) - (2.0 * 0.75f32.tanh() - 1.0)).abs() < 1e-6);
    }
}
