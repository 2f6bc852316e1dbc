"""Signed attestations of replays, and the verdict a pipeline can ask for.

A finished replay's claim ("this agent change reproduces at base B, under
this runner and image") leaves ReplayHub as an in-toto Statement v1 signed in
a DSSE envelope with an Ed25519 key, so anyone holding the public key can
check it was not edited (``docs/attestations.md``).

- ``statement``: the Statement and its predicate from a replay's stored
  values, as plain data; compact JSON with sorted keys, so one replay always
  yields the same bytes. No Django.
- ``dsse``: the envelope: pre-authentication encoding, signing, the key id,
  and verifying an untrusted envelope with bounded reading. No Django.
- ``keys``: the signing key the operator names in settings (a file, or an
  environment variable); never stored in the database, never logged.
- ``signing``: a replay's rows read into the statement, and signed.
- ``gate``: the latest settled verdicts of the runs whose original is a
  commit, for ``GET /api/v1/commits/<sha>/verdict``.
- ``views``: the attestation download, the public key, the commit gate.
- ``context_processors``: whether pages offer the attestation link.

The review app's knowledge (blind review, reviewers' decisions) reaches the
views from the root URLconf, which hands the functions in: the domain never
imports the people's side.
"""
