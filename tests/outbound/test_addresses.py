"""Where a webhook or a forge request may go: public addresses only, unless the
operator allows a range."""

from __future__ import annotations

import ipaddress

import pytest

from replayhub.outbound.addresses import (
    AddressRefused,
    address_problem,
    networks,
    resolve,
    split,
)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.9",
        "192.168.1.1",
        "169.254.169.254",  # the cloud metadata service
        "100.64.0.1",  # shared address space (carrier-grade NAT)
        "0.0.0.0",  # noqa: S104 - an address checked, not bound
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",  # loopback, mapped into IPv6
    ],
)
def test_private_loopback_link_local_and_reserved_addresses_are_refused(address):
    assert address_problem(ipaddress.ip_address(address), ())


@pytest.mark.parametrize("address", ["140.82.112.5", "2606:4700::1111"])
def test_public_addresses_pass(address):
    assert address_problem(ipaddress.ip_address(address), ()) == ""


def test_an_allowed_range_lets_its_addresses_through_and_no_others():
    allowed = networks(["127.0.0.1/32", "10.0.0.0/8"])
    assert address_problem(ipaddress.ip_address("127.0.0.1"), allowed) == ""
    assert address_problem(ipaddress.ip_address("10.9.9.9"), allowed) == ""
    assert address_problem(ipaddress.ip_address("127.0.0.2"), allowed)
    assert address_problem(ipaddress.ip_address("192.168.0.1"), allowed)


def test_a_name_resolving_to_loopback_is_refused_and_the_checked_address_kept():
    with pytest.raises(AddressRefused, match="not a public address"):
        resolve("http://localhost:8080/hook", ())
    allowed = networks(["127.0.0.0/8", "::1/128"])
    assert resolve("http://127.0.0.1:8080/hook", allowed).is_loopback


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "file:///etc/passwd",
        "http:///nohost",
        "https://user:pw@example.com/hook",
        "http://example.com:99999/",
    ],
)
def test_only_plain_http_and_https_urls_are_taken(url):
    with pytest.raises(AddressRefused):
        split(url)
