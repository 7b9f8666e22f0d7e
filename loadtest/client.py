"""A small HTTP client for the flash-sale API, shared by the demo, the tests and
the load tools so that each speaks the contract the same way."""

from __future__ import annotations

import ipaddress
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from common.work import challenge_solve

# A kept-alive connection whose close the network lost (an nginx reload, a partition
# that healed) fails the next request sent on it, unanswered. Reads ask again on a new
# connection; purchases never do here: their buyers retry with their key, and a
# history records each try.
READS_AGAIN = Retry(total=2, allowed_methods=frozenset({"GET", "HEAD"}), status_forcelist=(),
                    backoff_factor=0.05)


# Tries of a reset answered 503, each after the answer's Retry-After.
RESET_TRIES = 5


def with_work(send: Callable[[dict[str, str]], requests.Response], challenge_url: str, *,
              timeout: float = 30.0, solve: Callable[[str, int], str] = challenge_solve) -> requests.Response:
    """``send(headers)``, and once more with a proof of work's solution if the door
    asks for one (403 ``challenge_refused``): its challenge from ``challenge_url``,
    solved by ``solve`` (here, ``common.work.challenge_solve``), as a page's Web
    Worker would."""
    response = send({})
    if response.status_code != 403 or _error_of(response) != "challenge_refused":
        return response
    challenge = requests.post(challenge_url, timeout=timeout)
    _raise_for_status(challenge)
    given = challenge.json()
    return send({"Challenge-Solution": solve(given["challenge"], given["bits"])})


def _error_of(response: requests.Response) -> str | None:
    try:
        return response.json().get("error")
    except ValueError:
        return None


def _raise_for_status(response: requests.Response) -> None:
    """``raise_for_status`` with the answer's body in the message: the project's JSON
    error says which refusal it was."""
    try:
        response.raise_for_status()
    except requests.HTTPError as e:
        raise requests.HTTPError(f"{e}: {response.text[:500]}", response=response) from None


class SignedUpBuyers(Mapping[str, str]):
    """Bearer tokens by buyer label, each label a throwaway buyer that signs up
    (``POST /api/buyers``) the first time it is asked for: the stack's own tests and
    tools buying from apps that take the buyer from credentials. The server names the
    buyer; a label stays the same buyer for as long as this object lives."""

    def __init__(self, base_url: str, timeout: float = 30.0):
        self.url = f"{base_url.rstrip('/')}/api/buyers"
        self.timeout = timeout
        self._tokens: dict[str, str] = {}
        self._mutex = threading.Lock()
        self._local = threading.local()  # a session a thread: its connection kept alive

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = _session_for(self.url)
        return session

    def __getitem__(self, label: str) -> str:
        with self._mutex:
            token = self._tokens.get(label)
        if token is None:
            session = self._session()
            response = with_work(lambda headers: session.post(self.url, json={}, headers=headers,
                                                              timeout=self.timeout),
                                 f"{self.url}/challenge", timeout=self.timeout)
            _raise_for_status(response)
            with self._mutex:
                token = self._tokens.setdefault(label, response.json()["token"])
        return token

    def signed_up(self, labels: list[str], threads: int = 8) -> None:
        """Sign ``labels``' buyers up now, several at once, rather than as each first buys."""
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(self.__getitem__, labels))

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._tokens))

    def __len__(self) -> int:
        return len(self._tokens)


def _session_for(url: str) -> requests.Session:
    """A session for requests to ``url``. A stack on this machine: no proxy, netrc or
    CA bundle of the environment applies to it (a proxy set for the world would get
    its requests), and looking for them costs every request CPU."""
    session = requests.Session()
    session.trust_env = not _loopback(url)
    return session


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name
        return False


@dataclass
class FlashsaleClient:
    base_url: str
    admin_token: str | None = None
    timeout: float = 30.0
    # Buyer -> its bearer token, for apps that take the buyer from credentials
    # (FLASHSALE_BUYER_AUTH): a purchase then carries its buyer's token, not a user_id.
    tokens: Mapping[str, str] | None = None
    # How a door's proof of work is solved (a benchmark's: in processes of its own).
    solve: Callable[[str, int], str] = challenge_solve

    def __post_init__(self):
        self.session = _session_for(self.base_url)
        adapter = HTTPAdapter(max_retries=READS_AGAIN)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    @classmethod
    def for_stack(cls, config, tokens: Mapping[str, str] | None = None) -> FlashsaleClient:
        """A client for a local stack (a ``stack.config.StackConfig``): through its
        nginx, with its admin token; when the stack takes the buyer from credentials,
        its buyers are ``tokens``' (``loadtest.buyers.MadeBuyers``: made ahead), or
        sign up as they first buy."""
        if not config.buyer_auth:
            tokens = None
        elif tokens is None:
            tokens = SignedUpBuyers(config.base_url)
        return cls(config.base_url, admin_token=config.admin_token(), tokens=tokens)

    def _url(self, path: str) -> str:
        return f"{self.base_url.rstrip('/')}{path}"

    def reset(self, sku: str, stock: int, name: str | None = None, segments: int | None = None,
              strategy: str | None = None, **window: str | int) -> dict:
        """Reset ``sku`` (under ``strategy``; default: the deployment's); ``window``
        takes the reset's starts_at/starts_in/ends_at/ends_in."""
        optional = {"name": name, "segments": segments, "strategy": strategy}
        body = {"stock": stock} | {k: v for k, v in optional.items() if v} | window
        def post() -> requests.Response:
            return self.session.post(self._url(f"/api/admin/products/{sku}/reset"), json=body,
                                     timeout=self.timeout,
                                     headers={"Authorization": f"Token {self.admin_token}"})

        for attempt in range(1, RESET_TRIES + 1):
            try:
                response = post()
            except requests.ConnectionError:
                # A kept-alive connection that nginx closed as it reloaded (the stack's
                # instances restart between runs) drops the request unanswered; a reset
                # asks again on a new one: done twice, it leaves the same sale.
                response = post()
            if response.status_code != 503 or attempt == RESET_TRIES:
                break
            # Busy (its transaction waited out a row lock) or a server briefly away:
            # nothing was reset, and the answer says when to ask again.
            time.sleep(float(response.headers.get("Retry-After", 1)))
        _raise_for_status(response)
        return response.json()

    def audit(self, sku: str, *, settle: float = 30.0) -> dict:
        """The sale's full audit (the admin's: sent with this client's token). A
        product sold through the gate is audited once the persisters have written
        every order it accepted (its backlog is 0), or after ``settle`` seconds,
        whichever comes first (0: as it is now). A 503 ``busy`` (the sale being replaced
        in Redis: a reconciliation under way) is asked again within ``settle`` too."""
        deadline = time.monotonic() + settle
        while True:
            response = self.session.get(self._url(f"/api/products/{sku}/audit"), timeout=self.timeout,
                                        headers={"Authorization": f"Token {self.admin_token}"})
            if response.status_code == 503 and time.monotonic() < deadline and _error_of(response) == "busy":
                time.sleep(0.2)
                continue
            _raise_for_status(response)
            audit = response.json()
            if not (audit.get("gate") or {}).get("backlog") or time.monotonic() >= deadline:
                return audit
            time.sleep(0.05)

    def summary(self, sku: str) -> dict:
        """The sale's public summary (no token): at most a second and one audit old."""
        response = self.session.get(self._url(f"/api/products/{sku}/audit/summary"), timeout=self.timeout)
        _raise_for_status(response)
        return response.json()

    def race_start(self, strategies: list[str], **sizes: int) -> requests.Response:
        """POST /api/admin/races (``sizes``: stock, buyers, concurrency, room_rate,
        room_active); the response
        whatever its status (409: another race runs)."""
        return self.session.post(self._url("/api/admin/races"), json={"strategies": strategies, **sizes},
                                 headers={"Authorization": f"Token {self.admin_token}"}, timeout=self.timeout)

    def race(self, race_id: int) -> requests.Response:
        return self.session.get(self._url(f"/api/races/{race_id}"), timeout=self.timeout)

    def product(self, sku: str) -> dict:
        response = self.session.get(self._url(f"/api/products/{sku}"), timeout=self.timeout)
        _raise_for_status(response)
        return response.json()

    def healthz(self) -> dict:
        return self.session.get(self._url("/healthz"), timeout=self.timeout).json()

    def order(self, sku: str, quantity: int, user_id: str, key: str | None = None,
              admission: str | None = None) -> requests.Response:
        """POST /api/orders by ``user_id`` (with this client's ``tokens``, by its token),
        with the sale's waiting room's ``admission`` if given; returns the response
        whatever its status."""
        body, headers = self.as_buyer(user_id)
        body |= {"sku": sku, "quantity": quantity}
        headers["Idempotency-Key"] = key or uuid.uuid4().hex
        if admission is not None:
            headers["Admission"] = admission
        return self.session.post(self._url("/api/orders"), json=body, headers=headers, timeout=self.timeout)

    def room(self, sku: str, user_id: str) -> requests.Response:
        """POST /api/products/<sku>/room: ``user_id``'s place in the sale's waiting room."""
        body, headers = self.as_buyer(user_id)
        url = self._url(f"/api/products/{sku}/room")
        return with_work(lambda more: self.session.post(url, json=body, headers=headers | more,
                                                        timeout=self.timeout),
                         f"{url}/challenge", timeout=self.timeout, solve=self.solve)

    def order_detail(self, order_id: int, user_id: str | None = None) -> requests.Response:
        """GET /api/orders/<id> as its buyer ``user_id`` (with ``tokens``, its token),
        or without one as the admin; the response whatever its status."""
        headers = (self.as_buyer(user_id)[1] if user_id is not None
                   else {"Authorization": f"Token {self.admin_token}"})
        return self.session.get(self._url(f"/api/orders/{order_id}"), headers=headers, timeout=self.timeout)

    def pay(self, order_id: int, user_id: str, payment_method: str = "pm_card_visa",
            key: str | None = None) -> requests.Response:
        """POST /api/orders/<id>/pay as its buyer ``user_id``; the response whatever its status."""
        headers = self.as_buyer(user_id)[1] | {"Idempotency-Key": key or uuid.uuid4().hex}
        body = {"payment_method": payment_method}
        return self.session.post(self._url(f"/api/orders/{order_id}/pay"), json=body, headers=headers,
                                 timeout=self.timeout)

    def as_buyer(self, user_id: str) -> tuple[dict, dict]:
        """What names the buyer in a purchase: (body fields, headers), a new dict each."""
        if self.tokens is None:
            return {"user_id": user_id}, {}
        return {}, {"Authorization": f"Bearer {self.tokens[user_id]}"}
