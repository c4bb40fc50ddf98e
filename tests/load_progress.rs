//! The load progress callback (what `kolibri_model_load`'s callback sees): monotonic, ending at
//! 1, reporting through the repack of a big tensor too, and able to cancel. (Its own test binary:
//! the repack suite measures this process's memory.)

mod common;

use kolibri::model::Model;

#[test]
fn progress_covers_the_repack_and_can_cancel_it() {
    use kolibri::model::{LoadOptions, ModelError};
    let path = common::model_path("gemma-3-270m-q4_k_m.gguf");
    let mut seen = Vec::new();
    let mut record = |f: f32| {
        seen.push(f);
        true
    };
    let mut opts = LoadOptions {
        progress: Some(&mut record),
        ..Default::default()
    };
    Model::load_with(&path, &mut opts).unwrap();
    assert!(
        seen.windows(2).all(|w| w[0] <= w[1]),
        "not monotonic: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&1.0));
    // 70% of gemma's bytes are one tensor, the tied 178 MB output head: its repack reports
    // along the way, not only when it is done.
    let mid = seen.iter().filter(|&&f| f > 0.35 && f < 0.95).count();
    assert!(mid >= 3, "{mid} reports between 0.35 and 0.95: {seen:?}");

    let mut cancel = |f: f32| f < 0.5;
    let mut opts = LoadOptions {
        progress: Some(&mut cancel),
        ..Default::default()
    };
    assert!(matches!(
        Model::load_with(&path, &mut opts),
        Err(ModelError::Cancelled)
    ));
}
