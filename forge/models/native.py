"""What every native model policy shares: sending a request in its provider's form through
the provider's SDK, plain or streamed, sync or async, and reading the reply into the chat
form the run keeps (`NativePolicy`). A provider's module says only what differs: how its SDK
is called, how its reply is read, how its stream is put together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from forge.errors import UsageError
from forge.events import ModelCallStarted, Sink, sink
from forge.models.chat import ChatPolicy, ModelError, _naming_endpoint
from forge.records.effects import can_await
from forge.records.usage import ModelCall

__all__ = ["NativePolicy", "Streamed", "count"]


class Streamed(Protocol):
    """A streamed reply being put together: `take` each event the SDK yields (telling the
    listener each piece of text and of a call), then `reply()`, the JSON a reply sent
    without streaming has (raises ModelError when the stream was not a whole reply)."""

    def take(self, event: Any) -> None: ...

    def reply(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class NativePolicy(ChatPolicy):
    """A `ChatPolicy` whose requests go out in its provider's wire form (`from_chat`) through
    the provider's SDK; see `forge.models`. A subclass says how its SDK is called (`_sdk`,
    `_create`, `_clients`), how a reply reads (`_message`, `_counted`) and how a stream is
    put together (`_streamed`)."""

    def send(self, request: Mapping[str, Any]) -> Any:
        """Send `request` (in the provider's form) to the endpoint: the reply as JSON,
        `{"message": {…}, "usage": {…}}` (an awaitable of it where the caller can await).

        Raises:
            ModelError: the reply is not one (no content, a body that is not JSON).
            The SDK's own errors: the endpoint failed (the run ends in fatal_error).
        """
        if can_await():
            return self._aask(request)
        started, clock = time.time(), time.perf_counter()
        listener = sink()
        client = self._sync_client()
        try:
            if listener is None:
                data = self._dump(self._create(client, request, stream=False))
            else:
                listener(ModelCallStarted(self.model))
                streamed = self._streamed(listener)
                for event in self._create(client, request, stream=True):
                    streamed.take(event)
                data = streamed.reply()
        except ValueError as error:
            raise ModelError(f"the model's endpoint answered with a body that is not JSON: {error}") from error
        except self._unreachable() as error:
            raise _naming_endpoint(error, client) from None
        return self._reply(data, started, time.perf_counter() - clock)

    async def _aask(self, request: Mapping[str, Any]) -> Any:
        started, clock = time.time(), time.perf_counter()
        listener = sink()
        client = self._async_client()
        try:
            if listener is None:
                data = self._dump(await self._create(client, request, stream=False))
            else:
                listener(ModelCallStarted(self.model))
                streamed = self._streamed(listener)
                async for event in await self._create(client, request, stream=True):
                    streamed.take(event)
                data = streamed.reply()
        except ValueError as error:
            raise ModelError(f"the model's endpoint answered with a body that is not JSON: {error}") from error
        except self._unreachable() as error:
            raise _naming_endpoint(error, client) from None
        return self._reply(data, started, time.perf_counter() - clock)

    def _reply(self, response: Any, started: float, seconds: float) -> dict[str, Any]:
        """A reply (its JSON) as the journal keeps it: the assistant message in chat form,
        the reply's own parts kept as sent, and what the call cost."""
        prompt, completion, cached, stopped = self._counted(response)
        call = ModelCall(prompt, completion, cached, response.get("model"), started, seconds, stopped,
                         request_model=self.model, provider=self.provider)
        return {"message": self._message(response), "usage": call.to_json()}

    def _sync_client(self) -> Any:
        if self.client is None:
            object.__setattr__(self, "client", self._clients()[0]())
        return self.client

    def _async_client(self) -> Any:
        if self.async_client is None:
            sync, asynchronous = self._clients()
            if self.client is None:
                made = asynchronous()
            elif isinstance(self.client, sync):
                made = asynchronous(api_key=self.client.api_key, base_url=self.client.base_url,
                                    timeout=self.client.timeout, max_retries=self.client.max_retries)
            else:
                raise UsageError(f"{type(self).__name__} was given a client of type {type(self.client).__name__}, "
                                 "whose endpoint forge cannot read for arun(): pass async_client= as well")
            object.__setattr__(self, "async_client", made)
        return self.async_client

    def _sdk(self) -> Any:
        """The provider's SDK module."""
        raise NotImplementedError

    def _unreachable(self) -> tuple[type[Exception], ...]:
        """The SDK's errors for an endpoint that could not be reached (named in the error)."""
        return (self._sdk().APIConnectionError,)

    def _dump(self, response: Any) -> dict[str, Any]:
        """An SDK's reply object as the JSON it came as: its fields as sent (unknown ones too)."""
        dumped: dict[str, Any] = response.model_dump(mode="json", exclude_unset=True)
        return dumped

    def _clients(self) -> tuple[Any, Any]:
        """The SDK's sync and async client classes (each made with no argument reads the
        environment; the async one takes the sync one's `api_key`, `base_url`, `timeout`,
        `max_retries`)."""
        raise NotImplementedError

    def _create(self, client: Any, request: Mapping[str, Any], stream: bool) -> Any:
        """The SDK's call sending `request` (a stream of its events with `stream`)."""
        raise NotImplementedError

    def _streamed(self, listener: Sink) -> Streamed:
        raise NotImplementedError

    def _message(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """The reply as a chat-form assistant message, its own parts kept as sent.

        Raises:
            ModelError: the reply has no content."""
        raise NotImplementedError

    def _counted(self, data: Mapping[str, Any]) -> tuple[int, int, int, str | None]:
        """The reply's prompt, completion and cached tokens, and why it stopped."""
        raise NotImplementedError


def count(value: Any) -> int:
    """A token count as a provider reported it, 0 for anything that is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
