"""Where `rtlab kernel source` takes a tree from, without the network or the real kernel:
a folder, a tarball, a local git repository, and the pinned Debian source's checks."""

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest

from rtlab.kernel import source
from rtlab.kernel.source import (
    DebianFile,
    DebianSource,
    KernelSourceError,
    load_source,
    prepare_source,
    split_git_ref,
)

MAKEFILE = "# SPDX\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 100\nEXTRAVERSION =\n"


def fake_tree(root: Path) -> Path:
    (root / "scripts" / "kconfig").mkdir(parents=True)
    (root / "Makefile").write_text(MAKEFILE)
    (root / "scripts" / "kconfig" / "merge_config.sh").write_text("#!/bin/sh\n")
    (root / "localversion-rt").write_text("-rt15\n")
    return root


def quiet(message: str) -> None:
    pass


def test_a_folder_is_used_as_it_is(tmp_path):
    tree = fake_tree(tmp_path / "linux")
    result = prepare_source(str(tree), tmp_path / "cache", quiet)
    assert (result.path, result.version, result.patches) == (tree, "6.12.100-rt15", ())
    assert not (tmp_path / "cache").exists()


def test_not_a_kernel_tree(tmp_path):
    (tmp_path / "Makefile").write_text("all:\n")
    with pytest.raises(KernelSourceError, match="not a kernel source tree"):
        prepare_source(str(tmp_path), tmp_path / "cache", quiet)
    (tmp_path / "Makefile").write_text(MAKEFILE)
    with pytest.raises(KernelSourceError, match="no scripts/kconfig/merge_config.sh"):
        prepare_source(str(tmp_path), tmp_path / "cache", quiet)
    with pytest.raises(KernelSourceError, match="not a folder, a tarball"):
        prepare_source(str(tmp_path / "nothing-here"), tmp_path / "cache", quiet)


def test_a_tarball_is_unpacked_once(tmp_path):
    tree = fake_tree(tmp_path / "linux-6.12.100")
    tarball = tmp_path / "linux.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(tree, arcname="linux-6.12.100")
    messages: list[str] = []
    first = prepare_source(str(tarball), tmp_path / "cache", messages.append)
    assert first.path.parent == tmp_path / "cache" / "src"
    assert (first.path / "Makefile").read_text() == MAKEFILE
    assert "sha256" in first.origin and messages
    messages.clear()
    assert prepare_source(str(tarball), tmp_path / "cache", messages.append) == first
    assert messages == []


def test_a_git_url_is_cloned_once(tmp_path):
    repo = fake_tree(tmp_path / "repo")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "v1"], check=True)
    subprocess.run([*git, "tag", "v6.12"], check=True)
    url = f"file://{repo}@v6.12"
    first = prepare_source(url, tmp_path / "cache", quiet)
    assert first.version == "6.12.100-rt15" and "v6.12 (commit " in first.origin
    assert prepare_source(url, tmp_path / "cache", quiet) == first


@pytest.mark.parametrize(("text", "expected"), [
    ("https://git.kernel.org/linux.git", ("https://git.kernel.org/linux.git", None)),
    ("https://git.kernel.org/linux.git@v6.12", ("https://git.kernel.org/linux.git", "v6.12")),
    ("https://user@host/linux.git", ("https://user@host/linux.git", None)),
    ("git@github.com:org/linux.git", ("git@github.com:org/linux.git", None)),
    ("git@github.com:org/linux.git@rt/6.12", ("git@github.com:org/linux.git", "rt/6.12")),
])
def test_split_git_ref(text, expected):
    assert split_git_ref(text) == expected


def test_pinned_source_file():
    pinned = load_source()
    assert (pinned.package, pinned.version) == ("linux-6.12", "6.12.100-1~deb12u1")
    assert pinned.dsc.name == "linux-6.12_6.12.100-1~deb12u1.dsc"
    assert pinned.patch_series == "debian/patches-rt/series"
    assert len(pinned.files) == 3


def test_a_download_with_another_hash_is_refused(tmp_path):
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    (downloads / "x.dsc").write_text("not what was pinned\n")
    pinned = DebianSource(package="linux-x", version="1", base_url="http://127.0.0.1:9/",
                          files=(DebianFile("x.dsc", hashlib.sha256(b"pinned").hexdigest()),),
                          patch_series="debian/patches-rt/series")
    with pytest.raises(KernelSourceError, match=r"x.dsc: SHA-256 [0-9a-f]{64}, kernel/source"
                                                r".yaml pins"):
        source._download(pinned, downloads, quiet)


def test_bad_source_yaml(tmp_path):
    path = tmp_path / "source.yaml"
    path.write_text("package: linux\nversion: \"1\"\nbase_url: http://x/\npatch_series: s\n"
                    "files:\n  - name: a.dsc\n    sha256: abc\n")
    with pytest.raises(ValueError, match=rf"{path}:6: expected \{{name"):
        load_source(path)
    path.write_text("package: linux\nflavour: rt\n")
    with pytest.raises(ValueError, match=rf"{path}:2: unknown key 'flavour'"):
        load_source(path)
