//! Finding a model's tensors in the file and checking their names, shapes and types.

use super::Linear;
use crate::gguf::{GgufFile, TensorInfo};
use crate::kernels::{self, MatmulPlan, WeightMatrix};
use crate::model::error::ModelError;
use crate::quant::dequant::dequantize_row;

/// Experts' gate and up matrices.
pub(super) type GateUp = (Vec<Linear>, Vec<Linear>);

pub(super) struct Loader<'a> {
    pub gguf: &'a GgufFile,
}

impl Loader<'_> {
    fn find(&self, name: &str) -> Option<&TensorInfo> {
        self.gguf.tensor(name)
    }

    fn check_shape(&self, t: &TensorInfo, expected: &[u64]) -> Result<(), ModelError> {
        if t.dims != expected {
            return Err(ModelError::BadTensorShape {
                tensor: t.name.clone(),
                expected: expected.to_vec(),
                found: t.dims.clone(),
            });
        }
        Ok(())
    }

    pub fn linear_opt(
        &self,
        name: &str,
        k: usize,
        rows: usize,
    ) -> Result<Option<Linear>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        self.check_shape(t, &[k as u64, rows as u64])?;
        if !kernels::supports(t.ggml_type) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: name.into(),
                ty: t.ggml_type,
            });
        }
        let data = self.gguf.tensor_data(t);
        let start = self.gguf.tensor_start(t);
        let lin = in_place(name.to_owned(), t, start, rows, k, data)?;
        Ok(Some(lin))
    }

    pub fn linear(&self, name: &str, k: usize, rows: usize) -> Result<Linear, ModelError> {
        self.linear_opt(name, k, rows)?
            .ok_or_else(|| ModelError::MissingTensor(name.into()))
    }

    /// A vector that must exist when `required` and may be absent otherwise.
    pub fn vector_if(
        &self,
        required: bool,
        name: &str,
        n: usize,
    ) -> Result<Option<Vec<f32>>, ModelError> {
        match self.vector_opt(name, n)? {
            None if required => Err(ModelError::MissingTensor(name.into())),
            other => Ok(other),
        }
    }

    pub fn vector_opt(&self, name: &str, n: usize) -> Result<Option<Vec<f32>>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        self.check_shape(t, &[n as u64])?;
        let mut out = vec![0.0; n];
        dequantize_row(t.ggml_type, self.gguf.tensor_data(t), &mut out).map_err(|_| {
            ModelError::UnsupportedTensorType {
                tensor: name.into(),
                ty: t.ggml_type,
            }
        })?;
        Ok(Some(out))
    }

    /// A small matrix of `rows` rows of `cols` (ggml dims [cols, rows]), read whole as f32.
    pub fn small_matrix(
        &self,
        name: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Vec<f32>, ModelError> {
        let t = self
            .find(name)
            .ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        self.check_shape(t, &[cols as u64, rows as u64])?;
        let mut out = vec![0.0; cols * rows];
        let data = self.gguf.tensor_data(t);
        let row_bytes = data.len() / rows.max(1);
        for (r, row) in out.chunks_exact_mut(cols).enumerate() {
            dequantize_row(t.ggml_type, &data[r * row_bytes..(r + 1) * row_bytes], row).map_err(
                |_| ModelError::UnsupportedTensorType {
                    tensor: name.into(),
                    ty: t.ggml_type,
                },
            )?;
        }
        Ok(out)
    }

    pub fn vector(&self, name: &str, n: usize) -> Result<Vec<f32>, ModelError> {
        self.vector_opt(name, n)?
            .ok_or_else(|| ModelError::MissingTensor(name.into()))
    }

    /// The `n_expert` matrices [rows, k] of a stacked expert tensor (ggml dims [k, rows,
    /// n_expert]), each a [`Linear`] of its own named `name[i]`.
    pub fn experts(
        &self,
        name: &str,
        k: usize,
        rows: usize,
        n_expert: usize,
        count_key: &str,
    ) -> Result<Vec<Linear>, ModelError> {
        let t = self
            .find(name)
            .ok_or_else(|| ModelError::MissingTensor(name.into()))?;
        self.expert_blocks(t, k, &[("", rows)], n_expert, count_key)
    }

    /// The experts' gate and up matrices [rows, k] from one stacked tensor holding per expert
    /// its gate rows then its up rows (ggml dims [k, 2 * rows, n_expert]); `None` when the file
    /// has no such tensor.
    pub fn experts_gate_up_opt(
        &self,
        name: &str,
        k: usize,
        rows: usize,
        n_expert: usize,
        count_key: &str,
    ) -> Result<Option<GateUp>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        let parts = [(":gate", rows), (":up", rows)];
        let mut blocks = self
            .expert_blocks(t, k, &parts, n_expert, count_key)?
            .into_iter();
        let (mut gate, mut up) = (Vec::new(), Vec::new());
        while let (Some(g), Some(u)) = (blocks.next(), blocks.next()) {
            gate.push(g);
            up.push(u);
        }
        Ok(Some((gate, up)))
    }

    /// A stacked expert tensor `t` (its count and shape checked: ggml dims [k, sum of the
    /// parts' rows, n_expert]) cut per expert into its parts, in order: one [`Linear`] per
    /// `(suffix, rows)`, named `name[i]suffix`.
    fn expert_blocks(
        &self,
        t: &TensorInfo,
        k: usize,
        parts: &[(&str, usize)],
        n_expert: usize,
        count_key: &str,
    ) -> Result<Vec<Linear>, ModelError> {
        let rows: usize = parts.iter().map(|p| p.1).sum();
        check_expert_count(t, &[k as u64, rows as u64], n_expert, count_key)?;
        self.check_shape(t, &[k as u64, rows as u64, n_expert as u64])?;
        if !kernels::supports(t.ggml_type) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: t.name.clone(),
                ty: t.ggml_type,
            });
        }
        let blocks: Vec<(String, usize)> = (0..n_expert)
            .flat_map(|i| {
                (parts.iter()).map(move |&(suffix, r)| (format!("{}[{i}]{suffix}", t.name), r))
            })
            .collect();
        self.row_blocks(t, k, &blocks)
    }

    /// A matrix stored fused with others in one tensor [k, sum of rows] (ggml dims), cut into
    /// its row blocks: one [`Linear`] per `(label, rows)` of `parts`, named `name:label`.
    /// `None` when the file has no such tensor.
    pub fn fused_opt(
        &self,
        name: &str,
        k: usize,
        parts: &[(&str, usize)],
    ) -> Result<Option<Vec<Linear>>, ModelError> {
        let Some(t) = self.find(name) else {
            return Ok(None);
        };
        let total: usize = parts.iter().map(|p| p.1).sum();
        self.check_shape(t, &[k as u64, total as u64])?;
        if !kernels::supports(t.ggml_type) {
            return Err(ModelError::UnsupportedTensorType {
                tensor: name.into(),
                ty: t.ggml_type,
            });
        }
        let parts: Vec<(String, usize)> = parts
            .iter()
            .map(|&(label, rows)| (format!("{name}:{label}"), rows))
            .collect();
        self.row_blocks(t, k, &parts).map(Some)
    }

    /// Consecutive row blocks of `t` (its shape checked), one [`Linear`] per `(name, rows)`.
    fn row_blocks(
        &self,
        t: &TensorInfo,
        k: usize,
        parts: &[(String, usize)],
    ) -> Result<Vec<Linear>, ModelError> {
        let data = self.gguf.tensor_data(t);
        let total: usize = parts.iter().map(|p| p.1).sum();
        let row_bytes = data.len() / total.max(1);
        let start = self.gguf.tensor_start(t);
        let mut row0 = 0;
        parts
            .iter()
            .map(|(name, rows)| {
                let bytes = &data[row0 * row_bytes..(row0 + rows) * row_bytes];
                let lin = in_place(name.clone(), t, start + row0 * row_bytes, *rows, k, bytes);
                row0 += rows;
                lin
            })
            .collect()
    }

    /// The router [n_expert, k]: one logit per expert.
    pub fn router(
        &self,
        name: &str,
        k: usize,
        n_expert: usize,
        count_key: &str,
    ) -> Result<Linear, ModelError> {
        if let Some(t) = self.find(name) {
            check_expert_count(t, &[k as u64], n_expert, count_key)?;
        }
        self.linear(name, k, n_expert)
    }
}

/// An error naming the expert count's key when `t` has the `leading` dims and then another
/// count of experts than the metadata's.
fn check_expert_count(
    t: &TensorInfo,
    leading: &[u64],
    n_expert: usize,
    count_key: &str,
) -> Result<(), ModelError> {
    let n = leading.len();
    if t.dims.len() == n + 1 && t.dims[..n] == *leading && t.dims[n] != n_expert as u64 {
        return Err(ModelError::BadHyperparameter {
            key: count_key.into(),
            reason: format!("{n_expert} experts, but {} holds {}", t.name, t.dims[n]),
        });
    }
    Ok(())
}

/// A matrix [rows, k] of `t`'s type at `data` (file offset `start`), multiplied in place until
/// the loader repacks it.
fn in_place(
    name: String,
    t: &TensorInfo,
    start: usize,
    rows: usize,
    k: usize,
    data: &[u8],
) -> Result<Linear, ModelError> {
    let matrix = WeightMatrix {
        ty: t.ggml_type,
        rows,
        k,
        data,
    };
    let plan = MatmulPlan::in_place(kernels::backend(), &matrix).map_err(|e| {
        ModelError::BadTensorShape {
            tensor: format!("{name}: {e}"),
            expected: vec![k as u64, rows as u64],
            found: t.dims.clone(),
        }
    })?;
    Ok(Linear {
        name,
        ty: t.ggml_type,
        rows,
        k,
        start,
        len: data.len(),
        plan,
    })
}
