"""LLM providers: one small protocol, adapters for the official SDKs, and a callable wrapper.

- :class:`OpenAIProvider` speaks the Chat Completions API through the ``openai`` SDK and works
  with any OpenAI-compatible ``base_url`` (vLLM, Ollama, llama.cpp server, LiteLLM);
- :class:`AnthropicProvider` speaks the Messages API through the ``anthropic`` SDK;
- :class:`CallableProvider` wraps a plain function (tests, custom clients).

The SDKs are imported only when such a provider is constructed (``pip install context-compactor[llm]``).
Keys come from ``OPENAI_API_KEY`` / ``ANTHROPIC_API_KEY`` (or an explicit ``api_key``) and are
never printed, logged, or put in diagnostics or exceptions: error messages are built from the
error class, the HTTP status and the attempt count only, never from the SDK's own message (which
can embed URLs, and a ``base_url`` may carry userinfo). Exceptions are raised ``from None`` so
the SDK's exception (and its request object) is not chained.

Retries: the SDK's own retries are turned off (``max_retries=0``); this module retries
timeouts, connection errors, HTTP 408/409/429 and 5xx with exponential backoff
(``backoff * 2**attempt``, capped), so tests can use a tiny backoff.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from ..errors import ConfigError, LLMError, ProviderError

__all__ = [
    "AnthropicProvider",
    "CallableProvider",
    "Completion",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "provider_from_spec",
    "safe_url",
]

DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 2
DEFAULT_BACKOFF = 0.5
MAX_BACKOFF = 8.0
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 529})


@dataclass(frozen=True)
class Completion:
    """The text of one answer and the token counts the provider reported (0 if it did not)."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0


@runtime_checkable
class Provider(Protocol):
    """Anything with a name and ``complete``: the only thing compactor asks of an LLM."""

    name: str

    def complete(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion: ...


def safe_url(url: str | None) -> str:
    """A URL without userinfo, query or fragment: safe to show."""
    if not url:
        return ""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "<url>"


class _RetryingProvider:
    """Shared retry loop. Subclasses implement ``_once`` and ``_classify``."""

    name = "provider"

    def __init__(self, *, timeout: float = DEFAULT_TIMEOUT, retries: int = DEFAULT_RETRIES,
                 backoff: float = DEFAULT_BACKOFF, max_backoff: float = MAX_BACKOFF,
                 sleep: Callable[[float], None] = time.sleep):
        if timeout <= 0:
            raise ConfigError(f"llm timeout must be positive, got {timeout}")
        if retries < 0:
            raise ConfigError(f"llm retries must be >= 0, got {retries}")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = max(0.0, float(backoff))
        self.max_backoff = max(0.0, float(max_backoff))
        self._sleep = sleep
        self.attempts_made = 0  # attempts of the last complete() call

    def complete(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion:
        last: ProviderError | None = None
        self.attempts_made = 0
        for attempt in range(self.retries + 1):
            self.attempts_made = attempt + 1
            try:
                return self._once(prompt, max_tokens=max_tokens, temperature=temperature)
            except ProviderError as exc:
                last = exc
            except Exception as exc:  # SDK errors: classified without their messages
                last = self._classify(exc)
            if not last.retryable or attempt == self.retries:
                break
            delay = min(self.backoff * (2 ** attempt), self.max_backoff)
            if delay > 0:
                self._sleep(delay)
        assert last is not None
        n = self.attempts_made
        raise ProviderError(f"{self.name}: {last.message} (after {n} attempt{'s' if n != 1 else ''})",
                            code=last.code, status=last.status, attempts=n, retryable=last.retryable) from None

    # subclasses -------------------------------------------------------------------------
    def _once(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion:
        raise NotImplementedError

    def _classify(self, exc: Exception) -> ProviderError:
        return _generic_classify(exc)

    def __repr__(self) -> str:  # never shows a key
        return f"<{type(self).__name__} {self.name}>"


def _generic_classify(exc: Exception) -> ProviderError:
    if isinstance(exc, TimeoutError):
        return ProviderError("request timed out", code="llm-timeout", retryable=True)
    if isinstance(exc, ConnectionError):
        return ProviderError("connection failed", code="llm-connection-error", retryable=True)
    return ProviderError(f"provider raised {type(exc).__name__}", code="llm-error", retryable=False)


def _sdk_classify(exc: Exception, sdk: Any) -> ProviderError:
    """Map an openai/anthropic SDK exception to a ProviderError (both SDKs share the names)."""
    status_err = getattr(sdk, "APIStatusError", None)
    timeout_err = getattr(sdk, "APITimeoutError", None)
    conn_err = getattr(sdk, "APIConnectionError", None)
    validation_err = getattr(sdk, "APIResponseValidationError", None)
    if timeout_err is not None and isinstance(exc, timeout_err):
        return ProviderError("request timed out", code="llm-timeout", retryable=True)
    if status_err is not None and isinstance(exc, status_err):
        status = getattr(exc, "status_code", None)
        if status in (401, 403):
            return ProviderError(f"HTTP {status}: authentication failed (check the API key variable)",
                                 code="llm-auth-error", status=status, retryable=False)
        if status == 429:
            return ProviderError("HTTP 429: rate limited", code="llm-rate-limited", status=status, retryable=True)
        retry = status in RETRYABLE_STATUS or (isinstance(status, int) and status >= 500)
        return ProviderError(f"HTTP {status} from the endpoint", code="llm-http-error", status=status,
                             retryable=retry)
    if conn_err is not None and isinstance(exc, conn_err):
        return ProviderError("connection failed", code="llm-connection-error", retryable=True)
    if validation_err is not None and isinstance(exc, validation_err):
        return ProviderError("the endpoint's answer did not validate", code="llm-bad-response", retryable=False)
    return _generic_classify(exc)


def _import_sdk(module: str, extra: str = "llm"):
    try:
        return __import__(module)
    except ImportError:
        raise LLMError(f"the '{module}' package is not installed: pip install 'context-compactor[{extra}]'") from None


def _key_from_env(var: str, explicit: str | None) -> str | None:
    if explicit:
        return explicit
    val = os.environ.get(var)
    return val or None


class OpenAIProvider(_RetryingProvider):
    """Chat Completions through the official ``openai`` SDK, at any OpenAI-compatible base_url."""

    def __init__(self, model: str, base_url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = DEFAULT_BACKOFF,
                 api_key: str | None = None, api_key_env: str = "OPENAI_API_KEY", **kw):
        super().__init__(timeout=timeout, retries=retries, backoff=backoff, **kw)
        if not model:
            raise ConfigError("openai provider needs a model: 'openai:MODEL'")
        self.model = model
        self.base_url = base_url
        self.name = f"openai:{model}"
        sdk = _import_sdk("openai")
        self._sdk = sdk
        key = _key_from_env(api_key_env, api_key)
        if key is None:
            if base_url is None:
                raise LLMError(f"{api_key_env} is not set (needed for the OpenAI API; local "
                               "OpenAI-compatible servers given by base_url do not need it)")
            key = "not-needed"  # vLLM / Ollama / llama.cpp ignore it; the SDK insists on one
        try:
            self._client = sdk.OpenAI(api_key=key, base_url=base_url, timeout=self.timeout, max_retries=0)
        except Exception as exc:
            raise LLMError(f"openai client could not be created ({type(exc).__name__})") from None

    def _once(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion:
        resp = self._client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=int(max_tokens),
            temperature=float(temperature),
        )
        choices = getattr(resp, "choices", None) or []
        if not choices:
            raise ProviderError("the answer has no choices", code="llm-bad-response")
        msg = getattr(choices[0], "message", None)
        text = getattr(msg, "content", None) or ""
        usage = getattr(resp, "usage", None)
        return Completion(text=text, tokens_in=int(getattr(usage, "prompt_tokens", 0) or 0),
                          tokens_out=int(getattr(usage, "completion_tokens", 0) or 0))

    def _classify(self, exc: Exception) -> ProviderError:
        return _sdk_classify(exc, self._sdk)


class AnthropicProvider(_RetryingProvider):
    """The Messages API through the official ``anthropic`` SDK."""

    def __init__(self, model: str, base_url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 retries: int = DEFAULT_RETRIES, backoff: float = DEFAULT_BACKOFF,
                 api_key: str | None = None, api_key_env: str = "ANTHROPIC_API_KEY", **kw):
        super().__init__(timeout=timeout, retries=retries, backoff=backoff, **kw)
        if not model:
            raise ConfigError("anthropic provider needs a model: 'anthropic:MODEL'")
        self.model = model
        self.base_url = base_url
        self.name = f"anthropic:{model}"
        sdk = _import_sdk("anthropic")
        self._sdk = sdk
        key = _key_from_env(api_key_env, api_key)
        if key is None:
            raise LLMError(f"{api_key_env} is not set")
        try:
            self._client = sdk.Anthropic(api_key=key, base_url=base_url, timeout=self.timeout, max_retries=0)
        except Exception as exc:
            raise LLMError(f"anthropic client could not be created ({type(exc).__name__})") from None
        # Some SDK releases dropped the typed ``temperature`` argument; the API still takes it.
        try:
            import inspect

            params = inspect.signature(self._client.messages.create).parameters
            self._typed_temperature = "temperature" in params
        except (TypeError, ValueError):
            self._typed_temperature = True

    def _once(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion:
        kw: dict[str, Any] = {"temperature": float(temperature)}
        if not self._typed_temperature:
            kw = {"extra_body": kw}
        resp = self._client.messages.create(
            model=self.model,
            max_tokens=int(max_tokens),
            messages=[{"role": "user", "content": prompt}],
            **kw,
        )
        blocks = getattr(resp, "content", None) or []
        text = "".join(getattr(b, "text", "") or "" for b in blocks if getattr(b, "type", "") == "text")
        usage = getattr(resp, "usage", None)
        return Completion(text=text, tokens_in=int(getattr(usage, "input_tokens", 0) or 0),
                          tokens_out=int(getattr(usage, "output_tokens", 0) or 0))

    def _classify(self, exc: Exception) -> ProviderError:
        return _sdk_classify(exc, self._sdk)


class CallableProvider(_RetryingProvider):
    """Wrap ``fn(prompt, max_tokens=..., temperature=...)`` returning a str, a Completion or
    ``(text, tokens_in, tokens_out)``. Exceptions become ProviderErrors (TimeoutError →
    ``llm-timeout``); retries default to 0."""

    def __init__(self, fn: Callable[..., Any], *, name: str = "callable", retries: int = 0,
                 backoff: float = 0.0, timeout: float = DEFAULT_TIMEOUT, **kw):
        super().__init__(timeout=timeout, retries=retries, backoff=backoff, **kw)
        self.fn = fn
        self.name = name

    def _once(self, prompt: str, *, max_tokens: int, temperature: float) -> Completion:
        out = self.fn(prompt, max_tokens=max_tokens, temperature=temperature)
        if isinstance(out, Completion):
            return out
        if isinstance(out, str):
            return Completion(out)
        if isinstance(out, tuple) and len(out) == 3:
            return Completion(str(out[0]), int(out[1]), int(out[2]))
        raise ProviderError(f"callable returned {type(out).__name__}, expected str or Completion",
                            code="llm-bad-response")


PROVIDERS = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}


def provider_from_spec(spec: str, base_url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                       retries: int = DEFAULT_RETRIES, backoff: float = DEFAULT_BACKOFF, **kw) -> Provider:
    """``"openai:MODEL"`` or ``"anthropic:MODEL"`` → a provider. The model may contain colons
    (``openai:llama3:8b`` for Ollama). Raises ConfigError on a malformed spec and LLMError when
    the SDK or the key is missing."""
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"llm must look like 'openai:MODEL' or 'anthropic:MODEL', got {spec!r}")
    kind, model = spec.split(":", 1)
    kind = kind.strip().lower()
    model = model.strip()
    cls = PROVIDERS.get(kind)
    if cls is None:
        raise ConfigError(f"unknown llm provider {kind!r} (known: {', '.join(sorted(PROVIDERS))})")
    if not model:
        raise ConfigError(f"llm {spec!r} names no model: '{kind}:MODEL'")
    return cls(model, base_url, timeout=timeout, retries=retries, backoff=backoff, **kw)
