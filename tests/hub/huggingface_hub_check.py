"""The Python `huggingface_hub` package (from PyPI, unmodified) on a cache Kolibri wrote, and
Kolibri on a cache it wrote: the same files either way.

Usage: huggingface_hub_check.py sees REPO FILE EXPECTED_PATH
         huggingface_hub (HF_HOME from the environment, offline) finds REPO's FILE at
         EXPECTED_PATH (Kolibri's snapshot link), and scan_cache_dir reports the repository
         whole: no warnings, refs main, the blob's size.
       huggingface_hub_check.py download REPO FILE
         downloads REPO's FILE through HF_ENDPOINT and prints its path.
"""

import os
import sys

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
import huggingface_hub  # noqa: E402  (reads the environment when imported)


def sees(repo, filename, expected):
    path = huggingface_hub.hf_hub_download(repo, filename, local_files_only=True)
    assert os.path.realpath(path) == os.path.realpath(expected), (path, expected)
    assert os.path.abspath(path) == os.path.abspath(expected), (path, expected)
    info = huggingface_hub.scan_cache_dir()
    assert not info.warnings, info.warnings
    (found,) = [r for r in info.repos if r.repo_id == repo]
    (revision,) = found.revisions
    assert revision.refs == frozenset({"main"}), revision.refs
    (cached,) = [f for f in revision.files if f.file_name == os.path.basename(filename)]
    assert cached.size_on_disk == os.path.getsize(expected), cached
    print(f"huggingface_hub {huggingface_hub.__version__} sees {path}")


def download(repo, filename):
    print(huggingface_hub.hf_hub_download(repo, filename))


if __name__ == "__main__":
    {"sees": sees, "download": download}[sys.argv[1]](*sys.argv[2:])
