"""A storage root's identity: what names its writes outside the root.

Systems outside the root know it only by the names its driver gives them: a
:class:`~falkirk.io.postgres.PostgresSink` names each epoch's prepared transaction
``falkirk:<identity>:<sink>:<epoch>`` and marks the epochs it wrote under the same
prefix. A restarted driver finds its in-doubt transactions by that name, so the name
must follow the root wherever it is reached from - a symlink, a relative path, a
copy (``cp -a``) or a restored backup. It is therefore never derived from the root's
path: it is recorded in the root's metadata when the root is created.

* A new root: ``<pipeline>.<12 random hex digits>``.
* A root written before identities were recorded: the identity its recorded pipeline
  description holds, adopted and recorded (never a new hash of today's path). A root
  so old that it recorded no description gets a new identity; transactions it left
  under its old name are listed by ``falkirk status`` and resolved by
  ``falkirk resolve``.
* A member of a driver pair: the pair's identity, ``<pipeline>.pair-<pair id>``,
  shared by both members by design (they write the same sinks).

A copy of a root is a *restore*, not a fork: it keeps the identity, so it finds and
resolves the original's in-doubt transactions, and it writes to the same tables
(sinks are outside the root). Two copies of one root must not run side by side
against the same external systems: a PostgreSQL sink takes a lease keyed by the
identity and refuses the second. ``falkirk fork`` gives a copy a new identity on
purpose (:func:`fork`).
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
from dataclasses import dataclass

from falkirk.storage.exceptions import StorageError
from falkirk.storage.metastore import MetaStore

logger = logging.getLogger(__name__)

#: The root facts (:meth:`MetaStore.fact`) this module records.
IDENTITY = "identity"
PAIR_MEMBER = "pair_member"
#: The root fact holding the last run-time error's details (``falkirk inspect ROOT
#: failure``; written by :func:`falkirk.execution.diagnosis.recorded_failure`).
LAST_FAILURE = "last_failure"
#: Transaction ids are at most 200 bytes and split at ':'.
_VALID = re.compile(r"[^:\s]{1,150}")
_PAIRED = ".pair-"


class IdentityError(StorageError):
    """A root's identity does not fit how it is used (a pair member's root run
    alone, another pair's root, a fork of a root with in-doubt transactions)."""


@dataclass(frozen=True)
class RootIdentity:
    """The identity of a storage root (see the module docstring)."""

    value: str

    def __post_init__(self) -> None:
        if not _VALID.fullmatch(self.value):
            raise StorageError(f"a root identity is 1-150 characters without ':' or spaces, got {self.value!r}")

    @classmethod
    def new(cls, pipeline: str) -> RootIdentity:
        """A fresh identity for a new root of ``pipeline``."""
        return cls(f"{pipeline}.{secrets.token_hex(6)}")

    @classmethod
    def of_pair(cls, pipeline: str, pair_id: str) -> RootIdentity:
        """The identity both members of a driver pair share (see
        :meth:`falkirk.storage.pairs.PairStore.pair_id`)."""
        return cls(f"{pipeline}{_PAIRED}{pair_id}")

    @property
    def paired(self) -> bool:
        """Whether this is a driver pair's identity."""
        return _PAIRED in self.value

    def __str__(self) -> str:
        return self.value


def recorded(store: MetaStore) -> RootIdentity | None:
    """The identity ``store``'s root recorded, or the one its pipeline description
    holds (a root written before identities were recorded); None for a new root."""
    value = store.fact(IDENTITY)
    if value is None:
        value = (store.description() or {}).get("identity")
    return RootIdentity(value) if value else None


def establish(store: MetaStore, pipeline: str, pair: RootIdentity | None = None) -> RootIdentity:
    """The identity this run of ``pipeline`` writes under, recorded in ``store``
    before any external write: the recorded one, else (a new root) a new one, or
    ``pair`` for a member of a driver pair. Refuses a pair member's root run alone
    and a lone root joined to a pair (their external writes have other names)."""
    known = recorded(store)
    if known is None and store.has_commits() and pair is None:
        logger.warning(
            "storage root %s recorded no identity (written by an old Falkirk): it gets a new one; "
            "`falkirk status` lists transactions it left under its old name, `falkirk resolve` resolves them",
            store.root,
        )
    if pair is not None and known is not None and known != pair:
        raise IdentityError(
            f"this storage root was written under identity {known}, not {pair}: a driver pair's members need "
            "roots of their own pair (start a member on a fresh root: it catches up from the other), and a "
            "lone driver a root no pair used"
        )
    if pair is None and known is not None and known.paired:
        raise IdentityError(
            f"this storage root belongs to a member of driver pair identity {known}: run it with pair= (the "
            "pair's database), or start a lone driver on a fresh root"
        )
    identity = pair or known or RootIdentity.new(pipeline)
    if store.fact(IDENTITY) != identity.value:
        store.record_fact(IDENTITY, identity.value)
        logger.info("storage root %s identity=%s (%s)", store.root, identity, "adopted" if known else "new")
    return identity


def fork(store: MetaStore, pipeline: str) -> tuple[RootIdentity | None, RootIdentity]:
    """Give ``store``'s root a new identity (``falkirk fork``): from now on its
    external writes are its own, not those of the root it was copied from. The
    caller checks first that the old identity has no in-doubt transactions.
    Returns (old, new)."""
    old = recorded(store)
    if old is not None and old.paired:
        raise IdentityError(f"storage root {store.root} is a member of a driver pair ({old}): a pair member is not forked")
    new = RootIdentity.new(pipeline)
    store.record_fact(IDENTITY, new.value)
    return old, new


#: Every external transaction name starts so.
TRANSACTION_PREFIX = "falkirk:"


def transaction_prefix(identity: str, sink: str) -> str:
    """The prefix of the names of ``sink``'s external transactions under ``identity``
    (``falkirk:<identity>:<sink>:``; the epoch follows)."""
    return f"{TRANSACTION_PREFIX}{identity}:{sink}:"


def parse_transaction(name: str) -> tuple[str, str, int] | None:
    """(identity, sink, epoch) of a transaction named by :func:`transaction_prefix`,
    or None for another name."""
    if not name.startswith(TRANSACTION_PREFIX):
        return None
    identity, _, rest = name[len(TRANSACTION_PREFIX) :].partition(":")
    sink, _, epoch = rest.rpartition(":")
    if not identity or not sink or not epoch.isdigit():
        return None
    return identity, sink, int(epoch)


def lease_key(prefix: str) -> int:
    """The PostgreSQL advisory-lock key of a root's lease on a sink's database (a
    stable 63-bit hash of the sink's transaction prefix)."""
    return int.from_bytes(hashlib.sha256(f"falkirk-root-lease:{prefix}".encode()).digest()[:8], "big") >> 1
