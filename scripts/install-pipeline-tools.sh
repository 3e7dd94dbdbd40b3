#!/bin/sh
# Tools that run the GitLab pipeline on this machine, without a GitLab server
# (tests/integration/test_pipeline_local.py, `make demo PIPELINE=1`): rsync (which
# gitlab-ci-local needs to copy the project for each job) from Debian, and gitlab-ci-local
# from npm into a project-local prefix under .cache/ (git-ignored), so that nothing is
# installed system-wide. Idempotent: each step is skipped when already done.
#
#   scripts/install-pipeline-tools.sh          install what is missing
#   scripts/install-pipeline-tools.sh --print  print the gitlab-ci-local path, install nothing
set -eu
cd "$(dirname "$0")/.."

# 4.73.0 is the last release that runs on Node 20 (Debian bookworm's is 18; the machines
# here have 20); 4.75 needs Node >= 22. Pinned, so every run gets the same pipeline semantics.
GCL_VERSION=4.73.0
NODE_MIN_MAJOR=20
PREFIX="${RTLAB_CACHE:-$PWD/.cache}/pipeline-tools/gitlab-ci-local-$GCL_VERSION"
GCL="$PREFIX/node_modules/.bin/gitlab-ci-local"

say() { printf '[pipeline-tools] %s\n' "$*"; }

# another apt-get or dpkg (unattended upgrades, a second job) may hold dpkg's lock for a
# while: wait for it rather than fail the set-up
APT_WAIT="-o DPkg::Lock::Timeout=600"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if [ "${1:-}" = "--print" ]; then
    echo "$GCL"
    exit 0
fi

if ! command -v rsync >/dev/null 2>&1; then
    say "installing rsync"
    as_root apt-get $APT_WAIT update -qq || say "apt-get update reported errors; continuing"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get $APT_WAIT install -y -qq --no-install-recommends rsync
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    say "node and npm are needed for gitlab-ci-local (Node >= $NODE_MIN_MAJOR)"
    exit 1
fi
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt "$NODE_MIN_MAJOR" ]; then
    say "Node $(node --version) is too old for gitlab-ci-local $GCL_VERSION (needs >= $NODE_MIN_MAJOR)"
    exit 1
fi

installed=$("$GCL" --version 2>/dev/null || true)
if [ "$installed" != "$GCL_VERSION" ]; then
    say "installing gitlab-ci-local $GCL_VERSION into $PREFIX"
    mkdir -p "$PREFIX"
    # --prefix keeps it out of the global node_modules; no audit/fund chatter in CI logs
    npm install --silent --no-audit --no-fund --prefix "$PREFIX" "gitlab-ci-local@$GCL_VERSION"
    installed=$("$GCL" --version)
    [ "$installed" = "$GCL_VERSION" ] || {
        say "gitlab-ci-local reports version '$installed', expected $GCL_VERSION"; exit 1; }
fi

# gitlab-ci-local 4.73.0 copies the project into a shell-isolated job's folder again
# before the job's after_script (rsync --delete of the tracked files), which wipes what
# the script wrote: the outputs its `artifacts: when: always` should keep, and the
# reservation file the after_script releases. GitLab runs after_script in the folder as
# the script left it; this one-statement change makes gitlab-ci-local do the same (the
# copy before the script stays). Checked against the pinned version: fails loudly if the
# statement is not found exactly once.
node -e '
const fs = require("fs");
const file = process.argv[1];
const copy = "await R.rsyncTrackedFiles($,Z,`${B}`);if(this.interactive)";
const before = "!J&&this.argv.shellIsolation)" + copy;
const after = "!J&&this.argv.shellIsolation&&F.length===0)" + copy;
const text = fs.readFileSync(file, "utf8");
if (text.includes(after)) process.exit(0);
if (text.split(before).length !== 2) {
    console.error("[pipeline-tools] " + file + ": the copy before after_script was not found");
    process.exit(1);
}
fs.writeFileSync(file, text.replace(before, after));
console.log("[pipeline-tools] gitlab-ci-local: after_script runs in the job folder as left");
' "$PREFIX/node_modules/gitlab-ci-local/dist/index.js"
say "gitlab-ci-local $installed at $GCL"
