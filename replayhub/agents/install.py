"""How the setup phase installs a profile's CLI.

The install runs in a sandbox of its own, before the project's setup
command, with ``$REPLAYHUB_ENV_DIR`` writable. Its source, in order:

- the worker's agent cache (``REPLAYHUB_AGENT_CACHE``): a folder per
  ``<profile>-<version>`` holding an npm cache (``npm/``) or a wheel folder
  (``wheels/``), bound read-only at :data:`CACHE_PATH`. npm will not read a
  cache it cannot write to, so the cache is copied into the environment for
  the install and removed after it; the proxy switches point at a dead port,
  so nothing is fetched.
- else the registry, through the setup phase's egress proxy with the
  registry's hosts (``profile.REGISTRY_HOSTS``) allowed for this install.

A PyPI CLI gets a virtualenv of its own made by the sandbox's Python at
``INSTALL_DIR``; its scripts name that path, which every later sandbox sees.
An npm CLI is installed with ``--prefix INSTALL_DIR`` and runs on the host's
``/usr/bin/node`` (the sandbox binds ``/usr`` read-only). The scripts are
fixed; the package and version arrive as arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from replayhub.agents.profile import INSTALL_DIR, NPM, REGISTRY_HOSTS, Profile

# Where the agent cache's folder for this release is bound in the sandbox.
CACHE_PATH = "/replayhub-agent-cache"
# Scratch room for the install (npm's cache copy, pip's temporary files),
# inside the environment so the setup's disk cap counts it; removed after.
WORK_DIR = "/replayhub-env/.agent-install"
# The system's CA bundle, when the sandbox has one: the host's trust for a
# registry reached through an intercepting proxy.
SYSTEM_CA = "/etc/ssl/certs/ca-certificates.crt"

NPM_SCRIPT = """set -e
dest=@DEST@; work=@WORK@
rm -rf "$work"; mkdir -p "$work/tmp"
export TMPDIR="$work/tmp" npm_config_update_notifier=false
set -- "$1" "$2" --prefix "$dest" --cache "$work/npm" --logs-max 0 \
  --no-audit --no-fund --loglevel warn
[ ! -r @CA@ ] || set -- "$@" --cafile @CA@
if [ -d @CACHE@/npm ]; then
  cp -R @CACHE@/npm "$work/npm"
  set -- "$@" --offline --proxy http://127.0.0.1:9 --https-proxy http://127.0.0.1:9
  echo "installing $1 from the agent cache"
else
  echo "installing $1 from the npm registry"
fi
spec=$1; cli=$2; shift 2
npm install "$@" "$spec" > "$work/log" 2>&1 || failed=$?
cat "$work/log"
if [ -n "${failed:-}" ]; then
  why=$(grep -m1 -i error "$work/log" || tail -n1 "$work/log")
  echo "installing $spec failed: $why"; exit "$failed"
fi
rm -rf "$work"
test -x "$dest/$cli" || { echo "installing $spec left no $cli"; exit 1; }
"""

PIP_SCRIPT = """set -e
dest=@DEST@; work=@WORK@
rm -rf "$work"; mkdir -p "$work/tmp"
export TMPDIR="$work/tmp" PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv "$dest"
set -- "$1" "$2" --quiet --no-input
[ ! -r @CA@ ] || set -- "$@" --cert @CA@
if [ -d @CACHE@/wheels ]; then
  set -- "$@" --no-index --find-links @CACHE@/wheels
  echo "installing $1 from the agent cache"
else
  echo "installing $1 from PyPI"
fi
spec=$1; cli=$2; shift 2
"$dest/bin/pip" install "$@" "$spec" > "$work/log" 2>&1 || failed=$?
cat "$work/log"
if [ -n "${failed:-}" ]; then
  why=$(grep -m1 ERROR "$work/log" || tail -n1 "$work/log")
  echo "installing $spec failed: $why"; exit "$failed"
fi
rm -rf "$work"
test -x "$dest/$cli" || { echo "installing $spec left no $cli"; exit 1; }
"""


def _filled(script: str) -> str:
    for token, value in (
        ("@DEST@", INSTALL_DIR),
        ("@WORK@", WORK_DIR),
        ("@CA@", SYSTEM_CA),
        ("@CACHE@", CACHE_PATH),
    ):
        script = script.replace(token, value)
    return script


NPM_SCRIPT = _filled(NPM_SCRIPT)
PIP_SCRIPT = _filled(PIP_SCRIPT)


@dataclass(frozen=True)
class InstallPlan:
    """One install: the argv, the agent cache's folder to bind (None: the
    registry), and the hosts the egress proxy allows (none from a cache)."""

    argv: tuple[str, ...]
    cache: Path | None
    egress: tuple[str, ...]


def cache_folder(profile: Profile, version: str) -> str:
    """The agent cache's folder name for one release."""
    return f"{profile.name}-{version or profile.version}"


def plan(profile: Profile, version: str, cache_root: Path | None) -> InstallPlan:
    """How to install ``profile`` at ``version`` (default: its pinned one),
    given the worker's agent cache (``cache_root``, or None)."""
    version = version or profile.version
    script = NPM_SCRIPT if profile.registry == NPM else PIP_SCRIPT
    kind = "npm" if profile.registry == NPM else "wheels"
    cache = None
    if cache_root is not None:
        candidate = cache_root / cache_folder(profile, version)
        if (candidate / kind).is_dir():
            cache = candidate
    return InstallPlan(
        argv=(
            "sh",
            "-c",
            script,
            "replayhub-install",
            profile.spec(version),
            profile.executable,
        ),
        cache=cache,
        egress=() if cache is not None else REGISTRY_HOSTS[profile.registry],
    )
