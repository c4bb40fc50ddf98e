//! Models by Hugging Face name: `kolibri pull OWNER/REPO[:QUANT]`, and `-hf` on the commands
//! that load a model.

use std::path::PathBuf;

use kolibri::hub::HubName;

use crate::args::Args;

pub const USAGE: &str = "  kolibri pull OWNER/REPO[:QUANT]
              (downloads the model into the Hugging Face cache, every part of a split one,
              resuming an interrupted download and checking each file's sha256, the cached
              ones too; HF_TOKEN,
              HF_HOME, HF_ENDPOINT and HF_HUB_OFFLINE as huggingface_hub reads them)
";

pub fn pull(raw: &[String]) -> Result<(), String> {
    let a = Args::parse("pull", raw, &[], &[])?;
    let [name] = a.positional.as_slice() else {
        return Err(format!("pull takes one name\n{USAGE}"));
    };
    let name = HubName::parse(name)?;
    #[cfg(feature = "hub")]
    let files = kolibri::hub::Hub::from_env()
        .verifying_cached()
        .fetch(&name, &mut Bar::new())?;
    #[cfg(not(feature = "hub"))]
    let files = fetch(&name)?;
    for path in files {
        println!("{}", path.display());
    }
    Ok(())
}

/// The model's files in the Hugging Face cache, downloaded first where missing.
#[cfg(feature = "hub")]
pub fn fetch(name: &HubName) -> Result<Vec<PathBuf>, String> {
    kolibri::hub::Hub::from_env().fetch(name, &mut Bar::new())
}

/// Without the `hub` feature: the cache only.
#[cfg(not(feature = "hub"))]
pub fn fetch(name: &HubName) -> Result<Vec<PathBuf>, String> {
    kolibri::hub::HfCache::from_env()
        .resolve(name)
        .map_err(|e| format!("{e} (this build cannot download: feature `hub` is off)"))
}

/// A download's progress bar (bytes, rate, time left) on stderr, when it is a terminal.
#[cfg(feature = "hub")]
struct Bar(Option<indicatif::ProgressBar>);

#[cfg(feature = "hub")]
impl Bar {
    fn new() -> Bar {
        use std::io::IsTerminal;
        Bar(None).with_terminal(std::io::stderr().is_terminal())
    }

    fn with_terminal(self, terminal: bool) -> Bar {
        if !terminal {
            return self;
        }
        let style = indicatif::ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .map(|s| s.progress_chars("=> "));
        let bar =
            indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
        if let Ok(style) = style {
            bar.set_style(style);
        }
        Bar(Some(bar))
    }
}

#[cfg(feature = "hub")]
impl kolibri::hub::Progress for Bar {
    fn start(&mut self, file: &str, done: u64, total: u64) {
        match &self.0 {
            Some(bar) => {
                bar.reset();
                bar.set_length(total);
                bar.set_position(done);
                bar.set_message(file.rsplit('/').next().unwrap_or(file).to_owned());
            }
            None => eprintln!("downloading {file} ({done} of {total} bytes on disk)"),
        }
    }

    fn advance(&mut self, bytes: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(bytes);
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}
