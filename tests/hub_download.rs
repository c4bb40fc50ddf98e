#![cfg(feature = "hub")]
//! `kolibri pull` and `-hf` against a Hub in the test process (`common::fake_hub`, through
//! `HF_ENDPOINT`): the file llama.cpp's `-hf` picks, downloaded into the Hugging Face cache as
//! huggingface_hub lays it out; a transfer cut short resumes where it stopped (no byte sent
//! twice), also in a second process; a corrupted transfer is caught by its sha256 and fetched
//! again, as is a corrupted file in the cache when pulled; a split model's three parts are
//! fetched and run; a missing repository, a gated one
//! without a token and one without GGUF files are clear errors; offline, the cache serves.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::fake_hub::{FakeHub, HubFile, Transfer};
use kolibri::quantize::{quantize_file, Options, SplitOutput};

const MODEL: &str = "gemma-3-270m-q4_k_m.gguf";
const COMMIT: &str = "c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00";

fn kolibri(home: &Path, endpoint: &str, args: &[&str], extra: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kolibri"));
    cmd.args(args)
        .env("HF_HOME", home)
        .env("HF_ENDPOINT", endpoint)
        .env("KOLIBRI_REPACK_CACHE", "0");
    for k in [
        "HF_HUB_CACHE",
        "HUGGINGFACE_HUB_CACHE",
        "HF_TOKEN",
        "HF_HUB_OFFLINE",
    ] {
        cmd.env_remove(k);
    }
    cmd.envs(extra.iter().copied()).output().unwrap()
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fresh(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kolibri-hub-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The transfers of blob `sha`, once the server has logged `want` bytes of them.
fn transfers(hub: &FakeHub, log: &mut Vec<Transfer>, sha: &str, want: u64) -> Vec<Transfer> {
    for _ in 0..100 {
        log.extend(hub.take_log());
        let got: Vec<Transfer> = log.iter().filter(|t| t.sha256 == sha).cloned().collect();
        if got.iter().map(|t| t.sent).sum::<u64>() >= want {
            return got;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{sha}: {log:?}");
}

#[test]
fn pull_resumes_checks_and_fetches_every_part() {
    let work = fresh("files");
    let model = common::model_path(MODEL);
    let file = HubFile::new("gemma-3-270m-it-Q4_K_M.gguf", &model);
    // The same model in three parts.
    let opts = Options {
        file_type: None,
        allow_requantize: false,
        pure: false,
        split: SplitOutput {
            max_bytes: Some(file.size / 3 + 1),
            ..Default::default()
        },
    };
    let parts = quantize_file(&model, &work.join("g.gguf"), &opts, |_, _| {})
        .unwrap()
        .parts;
    assert_eq!(parts.len(), 3);
    let hub = FakeHub::start();
    let other = common::data_path("ppl-text.txt");
    hub.repo(
        "google/gemma-3-270m-it-GGUF",
        COMMIT,
        vec![
            HubFile::new("README.md", &other),
            HubFile::new("gemma-3-270m-it-Q8_0.gguf", &other),
            file.clone(),
        ],
    );
    hub.repo(
        "someone/gemma-split",
        COMMIT,
        parts
            .iter()
            .map(|p| {
                HubFile::new(
                    &format!("Q4_K_M/{}", p.file_name().unwrap().to_str().unwrap()),
                    p,
                )
            })
            .collect(),
    );
    hub.repo(
        "someone/no-gguf",
        COMMIT,
        vec![HubFile::new("README.md", &other)],
    );
    hub.repo("someone/gated", COMMIT, vec![file.clone()]);
    hub.gate("someone/gated", "hf_secret");
    let mut log = Vec::new();

    // Cut twice in one process: resumed, never a byte twice; the blob is the file.
    let home = fresh("home");
    hub.cut(&[60 << 20, 70 << 20]);
    let printed = common::succeeded(&kolibri(
        &home,
        &hub.url,
        &["pull", "google/gemma-3-270m-it-GGUF"],
        &[],
    ));
    let got = transfers(&hub, &mut log, &file.sha256, file.size);
    assert_eq!(
        got.iter().map(|t| (t.from, t.sent)).collect::<Vec<_>>(),
        [
            (0, 60 << 20),
            (60 << 20, 70 << 20),
            (130 << 20, file.size - (130 << 20))
        ]
    );
    let repo = home.join("hub/models--google--gemma-3-270m-it-GGUF");
    let link = repo.join("snapshots").join(COMMIT).join(&file.path);
    assert_eq!(printed.trim(), link.to_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(repo.join("refs/main")).unwrap(),
        COMMIT
    );
    assert!(std::fs::read_link(&link).unwrap().is_relative());
    assert_eq!(
        std::fs::read(&link).unwrap(),
        std::fs::read(&model).unwrap()
    );
    assert!(repo.join("blobs").join(&file.sha256).is_file());
    log.clear();
    // Pulled again: nothing crosses the network.
    common::succeeded(&kolibri(
        &home,
        &hub.url,
        &["pull", "google/gemma-3-270m-it-GGUF"],
        &[],
    ));
    std::thread::sleep(Duration::from_millis(100));
    assert!(hub.take_log().is_empty());

    // A corrupted file in the cache: pull checks it and fetches it again.
    let blob = repo.join("blobs").join(&file.sha256);
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[12345] ^= 1;
    std::fs::write(&blob, &bytes).unwrap();
    let e = String::from_utf8(
        kolibri(
            &home,
            &hub.url,
            &["pull", "google/gemma-3-270m-it-GGUF"],
            &[],
        )
        .stderr,
    )
    .unwrap();
    assert!(e.contains("corrupted"), "{e}");
    transfers(&hub, &mut log, &file.sha256, file.size);
    log.clear();
    assert_eq!(
        std::fs::read(&link).unwrap(),
        std::fs::read(&model).unwrap()
    );

    // Cut in every attempt: the process fails; the next one resumes from the bytes on disk.
    let home2 = fresh("home2");
    hub.cut(&[10 << 20; 4]);
    let e = failed(&kolibri(
        &home2,
        &hub.url,
        &["pull", "google/gemma-3-270m-it-GGUF"],
        &[],
    ));
    assert!(e.contains("broke off"), "{e}");
    transfers(&hub, &mut log, &file.sha256, 40 << 20);
    log.clear();
    common::succeeded(&kolibri(
        &home2,
        &hub.url,
        &["pull", "google/gemma-3-270m-it-GGUF:q4_k_m"],
        &[],
    ));
    let got = transfers(&hub, &mut log, &file.sha256, file.size - (40 << 20));
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].from, got[0].sent),
        (40 << 20, file.size - (40 << 20))
    );
    log.clear();

    // A corrupted transfer: caught by its sha256, fetched again whole.
    let home3 = fresh("home3");
    hub.corrupt_next();
    common::succeeded(&kolibri(
        &home3,
        &hub.url,
        &["pull", "google/gemma-3-270m-it-GGUF"],
        &[],
    ));
    let got = transfers(&hub, &mut log, &file.sha256, 2 * file.size);
    assert_eq!(got.iter().map(|t| t.from).collect::<Vec<_>>(), [0, 0]);
    log.clear();

    // A split model: every part fetched; it runs as the single file does.
    let run = |home: &Path, model: &[&str], extra: &[(&str, &str)]| {
        let args = [&["run"][..], model, &common::GREEDY_RUN];
        kolibri(home, &hub.url, &args.concat(), extra)
    };
    let single = common::succeeded(&run(&home, &["-m", model.to_str().unwrap()], &[]));
    assert_eq!(
        common::succeeded(&run(&home3, &["-hf", "someone/gemma-split"], &[])),
        single
    );
    let split = home3
        .join("hub/models--someone--gemma-split/snapshots")
        .join(COMMIT)
        .join("Q4_K_M");
    assert_eq!(std::fs::read_dir(split).unwrap().count(), 3);

    // Offline, and with the Hub out of reach: the cache serves; what it lacks is an error.
    let offline = [("HF_HUB_OFFLINE", "1")];
    assert_eq!(
        common::succeeded(&run(
            &home,
            &["-hf", "google/gemma-3-270m-it-GGUF"],
            &offline
        )),
        single
    );
    let gone = "http://127.0.0.1:9";
    let by_name = [
        "run",
        "-hf",
        "google/gemma-3-270m-it-GGUF",
        "-p",
        "Hi",
        "-n",
        "1",
    ];
    common::succeeded(&kolibri(&home, gone, &by_name, &[]));
    let e = failed(&run(&home, &["-hf", "someone/gemma-split"], &offline));
    assert!(
        e.contains("not in the Hugging Face cache") && e.contains("HF_HUB_OFFLINE"),
        "{e}"
    );

    // Refusals.
    let pull =
        |name: &str, extra: &[(&str, &str)]| kolibri(&home, &hub.url, &["pull", name], extra);
    for (name, why) in [
        ("nobody/nothing", "is not a model repository"),
        ("someone/no-gguf", "no GGUF model file"),
        ("someone/gated", "needs a token"),
        (
            "google/gemma-3-270m-it-GGUF:Q5_K_M",
            "no GGUF file of quantization Q5_K_M",
        ),
    ] {
        let e = failed(&pull(name, &[]));
        assert!(e.contains(why), "{name}: {e}");
    }
    let e = failed(&pull("someone/gated", &[("HF_TOKEN", "hf_wrong")]));
    assert!(e.contains("token is refused"), "{e}");
    common::succeeded(&pull("someone/gated", &[("HF_TOKEN", "hf_secret")]));

    // huggingface_hub (from PyPI) sees Kolibri's download as its own, and Kolibri finds
    // huggingface_hub's.
    let python = |home: &Path, args: &[&str]| {
        let out = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hub/huggingface_hub_check.py"))
            .args(args)
            .env(
                "PYTHONPATH",
                common::python_package("huggingface_hub", "huggingface_hub==2.4.0"),
            )
            .env("HF_HOME", home)
            .env("HF_ENDPOINT", &hub.url)
            .env_remove("HF_HUB_CACHE")
            .env_remove("HUGGINGFACE_HUB_CACHE")
            .output()
            .unwrap();
        common::succeeded(&out)
    };
    python(
        &home,
        &[
            "sees",
            "google/gemma-3-270m-it-GGUF",
            &file.path,
            link.to_str().unwrap(),
        ],
    );
    let theirs = fresh("theirs");
    let path = python(
        &theirs,
        &[
            "download",
            "someone/gemma-split",
            "Q4_K_M/g-00002-of-00003.gguf",
        ],
    );
    assert!(
        path.trim().ends_with("Q4_K_M/g-00002-of-00003.gguf"),
        "{path}"
    );
    for p in [
        "Q4_K_M/g-00001-of-00003.gguf",
        "Q4_K_M/g-00003-of-00003.gguf",
    ] {
        python(&theirs, &["download", "someone/gemma-split", p]);
    }
    assert_eq!(
        common::succeeded(&run(&theirs, &["-hf", "someone/gemma-split"], &offline)),
        single
    );
    for d in [work, home, home2, home3, theirs] {
        std::fs::remove_dir_all(d).unwrap();
    }
}
