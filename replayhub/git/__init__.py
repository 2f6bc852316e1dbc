"""Git: a project's history read through GitPython, a replay's trees through the
git CLI in ReplayHub-owned git dirs, and mirrors of projects on a remote.

Modules:

- scratch: the host-owned scratch repository of one replay (provision the
  workspace, compare trees, check out a tree for its tests) and the one git
  CLI wrapper every git process of ReplayHub goes through (pinned
  environment, dangerous settings overridden on the command line, a timeout
  that kills the process group, capped output, the process waited for
  without polling).
- process: how that wrapper runs one git process: in a group of its own,
  waited on with a timeout and a watch (a mirror's byte cap), and, for a
  command that talks to a remote, tethered to its caller so that git and its
  helpers die with it, however it dies.
- history: read-only queries on a project's own history (``History``).
- patches: a patch applied at a base in a git dir of ReplayHub's own (an
  imported run's original: checked at import in a temporary one, made
  again by each replay in its scratch git dir), and the patch of a commit
  an earlier import wrote into a repository.
- mirrors: bare mirrors of the projects whose repository is a URL.
- agentfiles: the agents' own files (chat logs, session state, caches), read
  as the base has them on both sides of a comparison.
- hunks: the class of each differing file (whitespace, Python-equivalent,
  reordered, substantive). Pure. blobs: both sides of each file, read within
  bounds from the scratch git dir.

The rule: the host never runs git inside a directory an agent could write
(``scratch``'s docstring says how). Two ways in, by who owns what is read:

- The project's own history goes through GitPython, in ``history``:
  provenance (revs, merge bases, ancestry, the ancestry path whose first
  parents find the merge that brought an original in), preflight's HEAD
  branch and registration's repository check. The repository is
  admin-owned and only read. A ``History`` opens one ``git.Repo`` whose git
  processes get the pinned environment and ``-c`` overrides of the CLI
  wrapper; since GitPython adds to the worker's environment rather than
  replacing it, ``GIT_DIR``, the object directories and the
  environment-borne config (``GIT_CONFIG_PARAMETERS``, ``GIT_CONFIG_COUNT``)
  are set explicitly too. Revs resolve in GitPython's persistent ``git
  cat-file --batch-check``; only full shas reach a command line, and a rev
  that starts with ``-`` or holds whitespace reaches no git at all. A lookup
  has the same timeout as a git command, and the process's stderr is emptied
  after each one: GitPython never reads it, and some thousand warnings
  (ambiguous short names, broken refs) would fill the pipe and block
  cat-file for good. A ``History`` is not thread-safe; ``resolve_provenance``
  opens one per call unless handed one. Measured on the ingest benchmark's
  repository (300 agent branches, four threads): preflight went from about
  five git processes per run to one or two, and its CPU per run from
  8.6-10.7 ms to 4.8-6.2 ms.
- A replay's workspace goes through the git CLI (``scratch``). The workspace
  is agent-writable, its ``.git/config``, hooks and attributes included:
  provision, capture, compare and checkout use a ReplayHub-owned git dir
  with a private index and the whole environment replaced. Opening the
  workspace as a ``git.Repo`` would read its config.

Projects on a git remote. ``Project.repo_path`` is a path on the host or a
URL (https, http, ssh, git, file, or scp-like ``git@host:path``); the project
checks refuse any other transport and a URL carrying a password, and
registration checks that ``git ls-remote`` answers, last, once every other
value passed (``project_setup.remote_check``). ``Project.repository()``
is the one place a host learns where to read a project's history: a path as
given, or for a URL this host's mirror of it.

- Where mirrors live: each host that reads history (workers for preflight
  and replays; a web request leaves a remote project's preflight to a worker)
  keeps its own bare mirrors under
  ``REPLAYHUB_MIRROR_DIR`` (``var/mirrors``, or ``mirrors/`` beside the
  replays when ``var/`` is private: the sandbox's uid reads a replay's
  objects through alternates, read-only), one per project and URL, so a
  changed URL makes a new mirror and the new one's clone removes the old.
  Nothing an agent can write is a mirror or inside one; git runs there under
  the CLI wrapper, the transports limited by ``GIT_ALLOW_PROTOCOL``, with a
  timeout below the web server's, git's low-speed limit and a cap on the
  bytes one clone or fetch adds, tethered to the process that started it.
- What is fetched when: a mirror is cloned whole (``--mirror``) the first
  time a host needs it, under the mirror's lock, into a temporary name moved
  into place whole. Preflight fetches every ref once per project per
  preflight, before its first chunk. A replay (code or rollout) checks the
  commits its record names and fetches only when one is missing: those
  commits by name where the server allows it, else every ref. A commit the
  remote does not have either stays missing and is judged as in a local
  repository (``fixture_failed``, ``unreproducible``).
- When the remote cannot be read, the replay ends ``inconclusive /
  repo_unreachable`` with git's own last line (a row-1 reason: it says
  nothing of the agent); preflight leaves the runs pending and names the
  failure, so they are tried again. A mirror that already holds what a
  replay names is used without asking the remote.
- Credentials: a project names the environment variable that holds its
  token, never the token; it is read on each host when git runs and reaches
  git only through git's environment (a credential helper scoped to the
  URL's origin), never on disk, in an argument list, a URL or a message.
  The variable must be one the operator allows
  (``REPLAYHUB_REPO_CREDENTIAL_ENVS``), never the deployment's own secrets
  or a provider's key, checked at registration and again when it is read.
  ssh URLs use the host's own keys. ``mirrors`` holds the details.
- Deletion: deleting a project removes its mirrors on the deleting host once
  committed; the first mirror a host makes of any project also removes the
  mirrors of projects no longer in the database, which other hosts deleted.

Departure: a mirror is a full clone, not ``--filter=blob:none``. Replays
borrow the mirror's objects through alternates, and an object a partial
clone left on its server cannot be fetched on demand from a scratch git dir
that has no remote.
"""
