"""Secrets in connection strings never reach a message, a repr or a record
(:mod:`falkirk.redact`), whatever the spelling: the spellings an adversarial review
leaked with (a password holding ``/``, ``@``, ``#`` or ``?`` unencoded, an unquoted
key=value password with a space, a Redis URL a parser splits) are hidden whole, and
refused where they would be used, with a message that still says where."""

from __future__ import annotations

import pytest

from falkirk.cli import _dsns
from falkirk.exceptions import FalkirkError
from falkirk.io.postgres import PostgresSink
from falkirk.io.redis_streams import RedisStreamSource
from falkirk.redact import check_dsn, check_url, redact_dsn, redact_url, where_dsn
from falkirk.storage.pairs import PairStore

SECRET = "S3cretQ"
DSNS = [
    f"postgresql://u:{SECRET}/x@h/db",
    f"postgresql://u:{SECRET}@I@h/db",
    f"postgres://u:{SECRET}#f@h:5432/db",
    f"postgresql://u:{SECRET}?q@h/db",
    f"host=h port=1 password={SECRET} etA dbname=x",
    f"host=h password='{SECRET} x' dbname=x",
    f"postgresql://u:{SECRET}@h/db?sslpassword={SECRET}",
    f"host=h user=app password={SECRET} dbname=prod",
]
URLS = [f"redis://:{SECRET}/D@127.0.0.1:1/0", f"redis://:{SECRET}#E@h/0", f"redis://:{SECRET}?F@h/0", f"rediss://app:{SECRET}@h:1/0"]


@pytest.mark.parametrize("dsn", DSNS)
def test_no_spelling_of_a_dsn_shows_its_password(dsn: str) -> None:
    assert SECRET not in redact_dsn(dsn) and SECRET not in where_dsn(dsn)
    assert "h" in where_dsn(dsn)  # still says where


@pytest.mark.parametrize("url", URLS)
def test_no_spelling_of_a_url_shows_its_password(url: str) -> None:
    assert SECRET not in redact_url(url)


@pytest.mark.parametrize("dsn", [d for d in DSNS if " etA" in d or "/x@" in d or "@I@" in d or "#f@" in d or "?q@" in d])
def test_a_dsn_a_parser_would_split_is_refused_without_its_password(dsn: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_dsn(dsn, "X")
    assert SECRET not in str(refused.value) and refused.value.__cause__ is None
    for make in (lambda: PostgresSink(dsn, "t", mode="append"), lambda: PairStore(dsn, "p", "m")):
        with pytest.raises(FalkirkError) as error:
            make()
        assert SECRET not in str(error.value) and error.value.__cause__ is None and error.value.__suppress_context__


@pytest.mark.parametrize("url", URLS[:3])
def test_a_url_a_parser_would_split_is_refused_without_its_password(url: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_url(url, "R")
    assert SECRET not in str(refused.value)
    with pytest.raises(FalkirkError) as error:
        RedisStreamSource(url, "s", "g")
    assert SECRET not in str(error.value) and error.value.__suppress_context__


def test_well_formed_dsns_and_urls_pass() -> None:
    check_dsn("postgresql://app:p%2Fw@127.0.0.1:5432/db", "X")
    check_dsn("host=127.0.0.1 password='a b' dbname=x", "X")
    check_url("redis://:p%40w@127.0.0.1:6379/0", "R")
    assert SECRET not in repr(PostgresSink(f"postgresql://app:{SECRET}@h/db", "t", mode="append"))
    assert SECRET not in repr(RedisStreamSource(f"redis://:{SECRET}@h:1/0", "s", "g"))


def test_the_cli_dsn_option_hides_a_password_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FalkirkError) as error:
        _dsns([f"postgresql://u:{SECRET}@db/x"])  # no SINK= in front
    assert SECRET not in str(error.value)
    monkeypatch.setenv("SINK_DSN", f"postgresql://u:{SECRET}@db/x")
    assert _dsns(["out=env:SINK_DSN"]) == {"out": f"postgresql://u:{SECRET}@db/x"}
    with pytest.raises(FalkirkError, match="NOT_SET is not set"):
        _dsns(["out=env:NOT_SET"])


def test_free_text_keeps_no_password_of_a_url_or_a_key_value_pair() -> None:
    from falkirk.redact import redact_text

    trace = (
        "py4j.Py4JException: connecting to postgresql://falkirk:s3cr3t@127.0.0.1:5432/db failed\n"
        "  at redis://:hunter2@127.0.0.1:6379/0 and host=127.0.0.1 password=pw123 dbname=x\n"
        "  at org.apache.spark.sql.Dataset.collect(Dataset.scala:42)"
    )
    shown = redact_text(trace)
    assert "s3cr3t" not in shown and "hunter2" not in shown and "pw123" not in shown
    assert "postgresql://***@127.0.0.1:5432/db" in shown and "redis://***@127.0.0.1:6379/0" in shown
    assert "Dataset.scala:42" in shown and "password=***" in shown
