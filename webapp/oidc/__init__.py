"""Sign-in with the team's OpenID Connect providers (docs/identity.md): the flow (views),
who a person becomes (signin), their session's re-check against the provider (recheck),
and the audit log of identity (audit)."""
