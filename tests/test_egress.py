"""The operator's egress policy: tenant URLs reach public hosts, private ranges only when allowed."""

from __future__ import annotations

import pytest

from conveyor.egress import ENVIRONMENT_VARIABLE, EgressPolicy, EgressRefused, check_url


def fixed(*addresses: str):
    return lambda host: list(addresses)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("fd00::1", "private"),
        ("100.64.0.1", "shared"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("224.0.0.1", "multicast"),
    ],
)
def test_non_public_addresses_are_refused_and_named(address: str, kind: str) -> None:
    with pytest.raises(EgressRefused, match=kind) as caught:
        check_url(f"http://[{address}]:9000/" if ":" in address else f"http://{address}:9000/", EgressPolicy())
    assert caught.value.code == EgressRefused.code


def test_a_name_is_refused_when_any_of_its_addresses_is_private() -> None:
    with pytest.raises(EgressRefused, match=r"10\.0\.0\.7"):
        check_url("https://s3.example.com", EgressPolicy(), resolver=fixed("93.184.216.34", "10.0.0.7"))


def test_public_addresses_pass() -> None:
    check_url("https://s3.example.com/bucket", EgressPolicy(), resolver=fixed("93.184.216.34"))


def test_localhost_resolves_and_is_refused() -> None:
    with pytest.raises(EgressRefused, match="loopback"):
        check_url("http://localhost:9000", EgressPolicy())


def test_allowed_hosts_addresses_and_ranges_pass() -> None:
    policy = EgressPolicy.parse("127.0.0.1, minio.internal,10.0.0.0/8,[::1]")
    check_url("http://127.0.0.1:9000", policy)
    check_url("http://[::1]:9000", policy)
    check_url("http://MINIO.internal:9000", policy, resolver=fixed("192.168.5.5"))
    check_url("http://store.lan", policy, resolver=fixed("10.9.9.9"))
    with pytest.raises(EgressRefused):
        check_url("http://store.lan", policy, resolver=fixed("192.168.0.9"))


def test_embedded_use_is_not_checked() -> None:
    check_url("http://127.0.0.1:9000", None)
    check_url("file:///anything", None)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "http:///nohost", "gopher://x"])
def test_other_schemes_and_hostless_urls_are_refused(url: str) -> None:
    with pytest.raises(EgressRefused):
        check_url(url, EgressPolicy())


def test_an_unresolvable_host_is_refused_clearly() -> None:
    with pytest.raises(EgressRefused, match="cannot resolve"):
        check_url("http://no-such-host.invalid/", EgressPolicy())


def test_refusals_never_show_credentials_in_the_url() -> None:
    with pytest.raises(EgressRefused) as caught:
        check_url("http://user:s3cret@127.0.0.1/", EgressPolicy())
    assert "s3cret" not in str(caught.value)


def test_policy_from_environment_and_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, "127.0.0.1")
    policy = EgressPolicy.from_environment(["192.168.0.0/16"])
    check_url("http://127.0.0.1", policy)
    check_url("http://192.168.3.3", policy)


@pytest.mark.parametrize("entry", ["10.0.0.0/99", "bad host", "a@b"])
def test_bad_allow_list_entries_are_refused_by_name(entry: str) -> None:
    with pytest.raises(ValueError, match="egress allow-list entry"):
        EgressPolicy.parse(entry)
