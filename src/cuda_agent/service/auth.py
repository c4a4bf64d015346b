"""Who is calling: bearer tokens mapped to tenants, each with its own namespace of jobs.

Tokens come from an environment variable (``--token-env VAR``, comma-separated: one per
tenant). A tenant is named by a hash of its token, so the store never holds a token. With no
token configured the service only binds to the loopback (``check_bind``), and every caller is
the tenant ``local``.

What it does not do: TLS (put the service behind a proxy that terminates it, or keep it on a
private network), rate limits.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os

from cuda_agent.core.errors import ConfigError

LOCAL_TENANT = "local"


def tenant_of(token: str) -> str:
    return "t-" + hashlib.sha256(token.encode()).hexdigest()[:16]


class Tokens:
    """The accepted tokens (empty: no authentication, loopback only)."""

    def __init__(self, tokens: list[str]) -> None:
        self._tenants = {t: tenant_of(t) for t in tokens if t}

    @classmethod
    def from_env(cls, variable: str | None) -> Tokens:
        if not variable:
            return cls([])
        value = os.environ.get(variable, "")
        tokens = [t.strip() for t in value.split(",") if t.strip()]
        if not tokens:
            raise ConfigError(f"--token-env {variable}: the variable holds no token")
        short = [t for t in tokens if len(t) < 16]
        if short:
            raise ConfigError(f"--token-env {variable}: tokens must have 16 characters or more")
        return cls(tokens)

    @property
    def required(self) -> bool:
        return bool(self._tenants)

    def tenant(self, authorization: str | None) -> str | None:
        """The caller's tenant for an ``Authorization`` header, or None (refused)."""
        if not self.required:
            return LOCAL_TENANT
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        for known, tenant in self._tenants.items():
            if hmac.compare_digest(known.encode(), token.strip().encode()):
                return tenant
        return None


def check_bind(host: str, tokens: Tokens) -> None:
    """Refuse to listen beyond the loopback without a token."""
    if tokens.required:
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ConfigError(
            f"serving on {host} needs a bearer token: set one in an environment variable and "
            "pass --token-env VAR (or bind to 127.0.0.1)"
        )
