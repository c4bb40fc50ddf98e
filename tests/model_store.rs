//! The local model store (`kolibri list`, `show`, `rm`, `-m NAME`, `serve` without `-m`),
//! in a temporary home holding an Ollama store, an LM Studio models folder and a Hugging
//! Face cache, each laid out as its own tool lays it out; files are used in place.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const GEMMA: &str = "gemma-3-270m-q4_k_m.gguf";
const CODER: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn kolibri(home: &Path, args: &[&str]) -> Output {
    command(home).args(args).output().unwrap()
}

fn command(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kolibri"));
    cmd.env("HOME", home)
        .env("HF_HOME", home.join("hf"))
        .env("KOLIBRI_REPACK_CACHE", "0");
    for k in [
        "OLLAMA_MODELS",
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "XDG_CACHE_HOME",
        "HF_TOKEN",
        "HF_HUB_OFFLINE",
    ] {
        cmd.env_remove(k);
    }
    cmd
}

fn fresh(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kolibri-store-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn link(target: &Path, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, at).unwrap();
}

fn digest(c: char) -> String {
    std::iter::repeat_n(c, 64).collect()
}

/// An Ollama manifest at `manifests/registry.ollama.ai/library/NAME/TAG` whose layers are
/// `(media type, digest)`.
fn manifest(home: &Path, name_tag: &str, layers: &[(&str, &str)]) {
    let (name, tag) = name_tag.split_once(':').unwrap();
    let dir = home
        .join(".ollama/models/manifests/registry.ollama.ai/library")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let layers: Vec<serde_json::Value> = layers
        .iter()
        .map(|(t, d)| serde_json::json!({"mediaType": t, "digest": format!("sha256:{d}"), "size": 1}))
        .collect();
    let m = serde_json::json!({"schemaVersion": 2, "layers": layers});
    std::fs::write(dir.join(tag), m.to_string()).unwrap();
}

fn blob(home: &Path, digest: &str) -> PathBuf {
    home.join(format!(".ollama/models/blobs/sha256-{digest}"))
}

const MODEL_LAYER: &str = "application/vnd.ollama.image.model";

/// Ollama: gemma3:270m and gemma3:latest (one blob), a template layer of 270m's own, a
/// safetensors image and a damaged manifest (neither listed).
fn ollama_store(home: &Path) {
    let (model, template, other) = (digest('a'), digest('b'), digest('c'));
    link(&common::model_path(GEMMA), &blob(home, &model));
    std::fs::write(blob(home, &template), "{{ .Prompt }}").unwrap();
    std::fs::write(blob(home, &other), "not a GGUF file").unwrap();
    let template_layer = "application/vnd.ollama.image.template";
    manifest(
        home,
        "gemma3:270m",
        &[(MODEL_LAYER, &model), (template_layer, &template)],
    );
    manifest(home, "gemma3:latest", &[(MODEL_LAYER, &model)]);
    manifest(home, "safetensors-model:latest", &[(MODEL_LAYER, &other)]);
    let damaged = home.join(".ollama/models/manifests/registry.ollama.ai/library/broken");
    std::fs::create_dir_all(&damaged).unwrap();
    std::fs::write(
        damaged.join("latest"),
        "{\"layers\": [{\"digest\": \"sha256:../x\"}]}",
    )
    .unwrap();
}

/// LM Studio: the coder model, and a projector beside it (not a model).
fn lmstudio_folder(home: &Path) {
    let repo = home.join(".lmstudio/models/lmstudio-community/Qwen2.5-Coder-0.5B-Instruct-GGUF");
    link(
        &common::model_path(CODER),
        &repo.join("Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf"),
    );
    link(
        &common::model_path(CODER),
        &repo.join("mmproj-model-f16.gguf"),
    );
}

/// The Hugging Face cache: the synthetic split qwen3 model's three parts as blobs with
/// snapshot links, as huggingface_hub lays them out.
fn hf_cache(home: &Path) -> PathBuf {
    let repo = home.join("hf/hub/models--someone--qwen3-tiny-GGUF");
    let snapshot = repo.join("snapshots").join(COMMIT);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), COMMIT).unwrap();
    for (i, part) in common::synthetic::synthetic_split_parts("qwen3-tiny")
        .iter()
        .enumerate()
    {
        let blob = digest(char::from(b'1' + i as u8));
        std::fs::copy(part, repo.join("blobs").join(&blob)).unwrap();
        let name = format!("qwen3-tiny-Q8_0-{:05}-of-00003.gguf", i + 1);
        std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snapshot.join(name)).unwrap();
    }
    repo
}

fn greedy(home: &Path, model: &str) -> String {
    let args = [&["run", "-m", model][..], &common::GREEDY_RUN].concat();
    common::succeeded(&kolibri(home, &args))
}

#[test]
fn stored_models_are_listed_run_by_name_shown_and_removed() {
    let home = fresh("cli");
    ollama_store(&home);
    lmstudio_folder(&home);
    let hf_repo = hf_cache(&home);

    let list = common::succeeded(&kolibri(&home, &["list"]));
    let row = |name: &str| {
        list.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} not listed:\n{list}"))
            .to_owned()
    };
    for (name, words) in [
        ("gemma3:270m", ["Q4_K_M", "gemma3", "32768", "ollama"]),
        ("gemma3:latest", ["Q4_K_M", "gemma3", "32768", "ollama"]),
        (
            "lmstudio-community/Qwen2.5-Coder-0.5B-Instruct-GGUF:Q4_K_M",
            ["Q4_K_M", "qwen2", "32768", "lm-studio"],
        ),
        (
            "someone/qwen3-tiny-GGUF:Q8_0",
            ["", "qwen3", "", "hf-cache"],
        ),
    ] {
        let r = row(name);
        for w in words {
            assert!(r.contains(w), "{w} missing: {r}");
        }
    }
    assert_eq!(list.lines().count(), 5, "{list}");
    assert!(!list.contains("safetensors") && !list.contains("broken") && !list.contains("mmproj"));

    // A name runs the file in place, as its path does; a repository without a tag is its
    // Q4_K_M model; a split model from the Hugging Face cache loads every part.
    let by_path = greedy(&home, common::model_path(GEMMA).to_str().unwrap());
    assert_eq!(greedy(&home, "gemma3:270m"), by_path);
    assert_eq!(greedy(&home, "GEMMA3"), by_path, "a bare name is :latest");
    let coder = greedy(&home, common::model_path(CODER).to_str().unwrap());
    assert_eq!(
        greedy(&home, "lmstudio-community/Qwen2.5-Coder-0.5B-Instruct-GGUF"),
        coder
    );
    let split = common::synthetic::synthetic_split_parts("qwen3-tiny");
    assert_eq!(
        greedy(&home, "hf.co/someone/qwen3-tiny-GGUF:q8_0"),
        greedy(&home, split[0].to_str().unwrap())
    );
    // bench's list: a name and a path.
    let coder_path = common::model_path(CODER);
    let both = format!("gemma3:270m,{}", coder_path.display());
    let table = common::succeeded(&kolibri(
        &home,
        &[
            "bench", "-m", &both, "-p", "8", "-n", "2", "-r", "1", "-t", "2",
        ],
    ));
    assert!(
        table.contains("gemma3") && table.contains("qwen2"),
        "{table}"
    );
    let missing = kolibri(&home, &["run", "-m", "nosuch:7b", "-p", "x"]);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(
        !missing.status.success() && err.contains("kolibri list"),
        "{err}"
    );

    let shown: serde_json::Value = serde_json::from_str(&common::succeeded(&kolibri(
        &home,
        &["show", "gemma3:270m", "--json"],
    )))
    .unwrap();
    assert_eq!(shown["details"]["family"], "gemma3");
    assert_eq!(shown["details"]["quantization_level"], "Q4_K_M");
    assert_eq!(shown["model_info"]["general.architecture"], "gemma3");
    let human = common::succeeded(&kolibri(&home, &["show", "someone/qwen3-tiny-GGUF:Q8_0"]));
    assert_eq!(human.matches("qwen3-tiny-Q8_0-0000").count(), 3, "{human}");

    // rm as `ollama rm`: the manifest, then the blobs no other manifest uses.
    common::succeeded(&kolibri(&home, &["rm", "gemma3:270m"]));
    assert!(
        blob(&home, &digest('a')).exists(),
        "gemma3:latest still uses it"
    );
    assert!(!blob(&home, &digest('b')).exists());
    common::succeeded(&kolibri(&home, &["rm", "gemma3:latest"]));
    assert!(!blob(&home, &digest('a')).exists());
    assert!(!home
        .join(".ollama/models/manifests/registry.ollama.ai/library/gemma3")
        .exists());
    // From the Hugging Face cache: links, blobs, then the emptied repository.
    common::succeeded(&kolibri(&home, &["rm", "someone/qwen3-tiny-GGUF"]));
    assert!(!hf_repo.exists());
    common::succeeded(&kolibri(
        &home,
        &[
            "rm",
            "lmstudio-community/Qwen2.5-Coder-0.5B-Instruct-GGUF:Q4_K_M",
        ],
    ));
    let list = common::succeeded(&kolibri(&home, &["list"]));
    assert_eq!(list.lines().count(), 1, "{list}");
    let again = kolibri(&home, &["rm", "gemma3:270m"]);
    assert!(!again.status.success());
    // The real models are untouched (their links went, not they).
    assert!(common::model_path(GEMMA).exists() && common::model_path(CODER).exists());
    std::fs::remove_dir_all(&home).unwrap();
}

/// `kolibri serve` without -m, driven by the `ollama` Python client from PyPI: list, pull
/// through a test Hub, generate by name (loaded on demand, one at a time), ps, show, delete,
/// and the idle unload giving the memory back.
#[cfg(feature = "hub")]
#[test]
fn a_server_without_a_model_loads_by_name_and_unloads_when_idle() {
    use common::fake_hub::{FakeHub, HubFile};
    let home = fresh("serve");
    let (model, template) = (digest('a'), digest('b'));
    link(&common::model_path(GEMMA), &blob(&home, &model));
    std::fs::write(blob(&home, &template), "{{ .Prompt }}").unwrap();
    manifest(&home, "gemma3:270m", &[(MODEL_LAYER, &model)]);
    let hub = FakeHub::start();
    let coder = HubFile::new("coder-Q4_K_M.gguf", &common::model_path(CODER));
    hub.repo("someone/coder-GGUF", COMMIT, vec![coder]);

    let mut server = command(&home)
        .args([
            "serve",
            "--port",
            "0",
            "-t",
            "2",
            "-c",
            "512",
            "--parallel",
            "1",
        ])
        .args(["--models-max", "1", "--idle-unload", "1"])
        .env("HF_ENDPOINT", &hub.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("{line}"))
        .to_owned();
    let out = Command::new("python3")
        .arg(common::data_path("../store/ollama_client_check.py"))
        .args([
            &url,
            &server.id().to_string(),
            "hf.co/someone/coder-GGUF:Q4_K_M",
        ])
        .env(
            "PYTHONPATH",
            common::python_package("ollama", "ollama==0.6.1"),
        )
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ok"),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::remove_dir_all(&home).unwrap();
}
