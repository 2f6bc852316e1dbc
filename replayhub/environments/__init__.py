"""A project's toolchain in the sandbox: the setup phase, its cache, root images.

The sandbox's own root is the host's read-only ``/usr``, which has none of a
project's dependencies. A project gives its replays an environment with a
setup phase, or a root image, or both.

Modules:

- build: the setup phase and a replay's environment (``for_replay`` maps
  every way preparation fails to its reason, for code and rollout replays
  alike); its docstring says how an environment is made and mounted.
- agent_setup: the setup phase's first step for a project with an agent
  profile (``replayhub.agents``): its CLI installed into the environment,
  from the worker's agent cache or its registry, in a sandbox of its own.
- cache: the environments one worker host keeps (layout, locks, eviction).
- store: the store the worker hosts share, publishing and fetching archives.
- images: root images imported on each worker and used as the sandbox root.

The rules:

- ``Project.setup_command`` (an argv) runs in the sandbox on a clean
  checkout of the base, with ``$REPLAYHUB_ENV_DIR`` (``/replayhub-env``)
  writable and egress only to the project's setup hosts, through the egress
  proxy, every attempt recorded (phase ``setup``). The setup calls no model,
  so nothing on loopback is exempt from its proxy: a package index on the
  worker's ``127.0.0.1`` is reached through it, allowed or refused. With no
  setup hosts every attempt is refused and listed, and a failed setup's
  reason names the hosts it was refused.
- Every later sandbox of the replay (the agent, the tests on every tree; a
  rollout's harness and verifier) gets the environment read-only at the same
  path, with its ``bin`` first on PATH. The runner is wrapped
  (``Environment.wrap``), so the test gate and the agent phase are not told
  about environments at all.
- The key is the sha256 of everything that built the environment: the setup
  command; the git blob ids at the base of the files matching the setup
  inputs (default: the common lockfiles), of the files a setup commonly
  reads (root scripts, Makefiles, ``tox.ini``, tool version files) and of
  every repository path the command's words name (a ``-c`` script's words
  included); the repository's root commits; the sandbox root (``host``, or
  the root image's digest); the setup settings; and its scope, the project
  or a group an admin names (``env_share_group``) for projects allowed to
  share one. Two projects with one setup command never share an environment
  by accident, and a base that edits ``setup.sh`` builds a new one. The
  replay's page and ``reproduce --json`` list what the key was made of, and
  the key joins the key of the original tree's cached test result.
- The cache lives on each worker host (``REPLAYHUB_ENV_CACHE_DIR``, default
  ``<work dir>/environments``): exclusive lock to build (concurrent replays
  with one key build once), shared lock while a replay runs with it, so
  eviction (which never waits) cannot take an environment from a running
  sandbox. Eviction is least-recently-used down to
  ``REPLAYHUB_ENV_CACHE_MAX_BYTES`` (20 GiB) after every build and on
  ``manage.py env_prune``.
- The shared store (``REPLAYHUB_ENV_STORE_DIR``, a directory every worker
  host mounts; unset: none): after a build the worker publishes
  ``<key>.tar.gz`` and then its manifest (sha256, size), each renamed into
  place; a host whose cache lacks a key checks the archive against its
  manifest and extracts it under the key's exclusive lock, setup not run.
  Extraction refuses what could reach outside the entry or onto the host
  (absolute names, ``..``, devices, FIFOs, setuid bits, foreign hard links,
  anything below a symlink), within the cache's cap. Any trouble either way
  is one log line: the replay builds, or keeps its local build. Workers
  never evict the store.
- A setup that fails (a non-zero exit, a cap) is remembered with its output
  tail for ``REPLAYHUB_ENV_FAILURE_SECONDS`` (an hour): the replay ends
  ``inconclusive / setup_failed`` (a row-1 reason, with the last output
  line), and the replays after it end the same way without running setup
  again. ``manage.py env_build SLUG [--base SHA]`` runs it again on purpose
  or builds ahead of the night; ``env_list`` shows the cache.
- The replay's evidence carries ``environment``: its key, whether it was
  cached, the build's seconds, on failure the output tail, and for one
  fetched from the store ``source: store`` and its ``fetch_seconds``.
- A project with an agent profile gets an environment even with no setup
  command: its CLI is installed first (``agent_setup``), under the setup
  phase's limits, and the key names the profile and version. The largest
  pinned install, Codex's 424 MB (plus its 165 MB npm cache, copied in and
  removed), fits the default 4,096 MB disk cap; mini-swe-agent's 31,000
  files fit the 200,000-file cap. A host keeps each finished install
  (``agent_installs``, keyed by release, source, script and root, never the
  project) and copies it into the next environment that needs it: a Python
  agent's minute of installing becomes a second or two of copying.
- The setup phase has limits of its own, sized for a dependency install
  (``setup_time_limit_seconds`` 1,800, ``setup_memory_mb`` 4,096,
  ``setup_max_disk_mb`` 4,096 over its checkout and the environment,
  ``setup_max_files`` 200,000) and the project's process cap.
- A missing toolchain is named, not counted as a failure
  (``verdicts.toolchain``).
- Root images: a project's ``root_image`` (pinned by digest) is imported on
  each worker with ``manage.py image_import REF --layout DIR[:TAG]`` from an
  OCI image layout and unpacked rootless with ``umoci``; device nodes,
  FIFOs and sockets are then removed, setuid and setgid bits cleared and
  foreign owners taken over, so a hostile layer brings nothing onto the
  worker host. The images directory is 0750, group the sandbox's. Without
  an unpacked copy the replay runs on the host's ``/usr`` with a provenance
  warning saying so; a record whose image digest differs is a warning, or
  ``inconclusive / image_mismatch`` when the project requires the match.
- The demo's second project (``demo.packaged``) installs a package its tests
  import from an index served on the worker's loopback: its first replay
  builds the environment, the others reuse it.

Departure: root images are imported by the admin on each worker rather than
pulled by ReplayHub, since workers may have no registry access.

Measured: ``benchmarks/environment.py`` runs a replay with a cached
environment beside the same replay with no setup phase (goal: at most
1.10x; docs/performance.md has the figure).
"""
